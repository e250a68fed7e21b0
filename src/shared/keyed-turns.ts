/**
 * One at a time per key, in arrival order, within this process: `run` starts `fn` once every earlier
 * holder of the same key has ended (returned or thrown). A key is kept only while someone holds or
 * waits on it, so the map never outgrows the work in progress. `onQueued` runs when the caller has to
 * wait (a test's mark of that event).
 */
export class KeyedTurns {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>, onQueued?: () => void): Promise<T> {
    const ahead = this.#tails.get(key);
    let release = () => {};
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.#tails.set(key, mine);
    try {
      if (ahead) {
        onQueued?.();
        await ahead; // never rejects: each holder only resolves its promise
      }
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === mine) this.#tails.delete(key);
    }
  }
}
