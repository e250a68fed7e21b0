/** `fn` callable any number of times, acting once: a release that a `finally` and an error path may both call. */
export function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
