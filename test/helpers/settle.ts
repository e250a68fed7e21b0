/**
 * Reads `read()` until `done` holds or `timeoutMs` has passed, and returns the last value: for
 * figures the server books a little later (buffered access counts, delivery-thread reports). The
 * caller asserts on the value, so a figure that never settles still fails the test.
 */
export async function settled<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 3000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await Bun.sleep(25);
    value = await read();
  }
  return value;
}
