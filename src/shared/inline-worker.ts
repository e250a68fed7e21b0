import { getOrCreate } from "./get-or-create";

/**
 * A Bun Worker from source text. The text becomes a Blob URL (made once per source), so the
 * single-file build carries the worker without an extra entry point; the source may import
 * only what the runtime provides (bun:sqlite, node:*).
 */
const urls = new Map<string, string>();

export function inlineWorker(source: string): Worker {
  return new Worker(getOrCreate(urls, source, () => URL.createObjectURL(new Blob([source], { type: "application/javascript" }))));
}

/**
 * Calls `onDeath` when the worker goes away: an uncaught error (`error`) or an exit (`close`,
 * e.g. `process.exit` or a fatal error in native code). Without this, whoever waits for the
 * worker's answer would wait forever. `close` also follows our own `terminate()`: callers
 * ignore a death once they are done with the worker.
 */
export function onWorkerDeath(worker: Worker, onDeath: (reason: string) => void): void {
  worker.onerror = (event) => onDeath(event.message || "后台线程出错");
  worker.addEventListener("close", (event) => onDeath(`后台线程意外退出（代码 ${(event as CloseEvent).code ?? "?"}）`));
}

/** Runs a one-shot worker: posts `message`, resolves with its first answer, rejects if it dies first. */
export function askWorkerOnce<T>(source: string, message: unknown): Promise<T> {
  const worker = inlineWorker(source);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      worker.terminate();
      done();
    };
    worker.onmessage = (event: MessageEvent<T>) => settle(() => resolve(event.data));
    onWorkerDeath(worker, (reason) => settle(() => reject(new Error(reason))));
    worker.postMessage(message);
  });
}
