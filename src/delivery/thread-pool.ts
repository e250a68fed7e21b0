/**
 * sharp runs each encode on the libuv thread pool and holds a thread for the encode's whole length.
 * Bun sizes that pool once, at start, from UV_THREADPOOL_SIZE, else one thread per core: two on a
 * small VPS. Renders that took every thread made everything else that needs one wait for them: an
 * upload's own sharp steps (probe, strip, hash), and anything of `node:fs`'s callback half (an 8 KB
 * upload took 98 s behind two cold AVIF renders; hostile-input audit). So renders keep one thread
 * free, and a PNG's two WebP encodes (transform.ts smallerWebp) run one after the other when the pool
 * has no room for both. deploy/kura.service and `bun run start` set UV_THREADPOOL_SIZE, so there
 * the setting `process_workers` applies as it is.
 */
import { availableParallelism } from "node:os";

export function uvPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const set = Number(env.UV_THREADPOOL_SIZE);
  return Number.isInteger(set) && set > 0 ? Math.min(set, 1024) : Math.max(1, availableParallelism());
}

/** Renders at once: `process_workers`, but never every pool thread (at least one render, though). */
export function renderConcurrency(workers: number, pool = uvPoolSize()): number {
  return Math.max(1, Math.min(workers, pool - 1));
}

/** Whether `renders` renders of two parallel encodes each still leave a pool thread free. */
export function encodesInParallel(renders: number, pool = uvPoolSize()): boolean {
  return 2 * renders <= pool - 1;
}
