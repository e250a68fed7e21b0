/**
 * `VACUUM INTO` off the event loop: a Bun Worker opens its own read-only connection and
 * writes the snapshot there, so a backup of a large database never holds requests. The
 * worker's code is a string (src/shared/inline-worker.ts): it needs nothing but bun:sqlite.
 */
import { inlineWorker } from "../shared/inline-worker";

const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
self.onmessage = (event) => {
  const { src, dst } = event.data;
  try {
    const db = new Database(src, { readonly: true });
    try {
      db.run("PRAGMA busy_timeout = 5000");
      db.run("VACUUM INTO '" + dst.replaceAll("'", "''") + "'");
    } finally {
      db.close();
    }
    postMessage({ ok: true });
  } catch (err) {
    postMessage({ ok: false, error: String((err && err.message) || err) });
  }
};`;

/** Writes a consistent copy of the database at `src` to `dst` (which must not exist) in a worker. */
export function vacuumIntoInWorker(src: string, dst: string): Promise<void> {
  const worker = inlineWorker(WORKER_SOURCE);
  return new Promise<void>((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<{ ok: boolean; error?: string }>) => {
      worker.terminate();
      if (event.data.ok) resolve();
      else reject(new Error(event.data.error));
    };
    worker.onerror = (event) => {
      worker.terminate();
      reject(new Error(event.message));
    };
    worker.postMessage({ src, dst });
  });
}
