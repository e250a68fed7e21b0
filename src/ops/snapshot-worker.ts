/**
 * `VACUUM INTO` off the event loop: a Bun Worker opens its own read-only connection and
 * writes the snapshot there, so a backup of a large database never holds requests. The
 * worker's code is a string (src/shared/inline-worker.ts): it needs nothing but bun:sqlite.
 */
import { askWorkerOnce } from "../shared/inline-worker";

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
export async function vacuumIntoInWorker(src: string, dst: string): Promise<void> {
  const answer = await askWorkerOnce<{ ok: boolean; error?: string }>(WORKER_SOURCE, { src, dst });
  if (!answer.ok) throw new Error(answer.error);
}
