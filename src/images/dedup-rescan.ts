/**
 * The rescan after a raised `dedup_phash_max_distance` (dedup.ts): every pair of indexed blobs
 * within the new distance, found off the event loop. A Bun Worker opens its own read-only
 * connection, loads every indexed hash (about 50 bytes a blob in typed arrays), and hands the pairs back a batch at a
 * time; the next batch is computed only when the main thread asks for it, so a large result
 * never piles up in memory and each insert transaction stays small.
 *
 * Exact for every allowed distance d (0–64), by the generalised pigeonhole rule of multi-index
 * hashing: two hashes within d differ in at most ⌊d/7⌋ bits in at least one of the 7 chunks.
 * Up to d = 20 (radius ≤ 2) the worker probes, per chunk, every value within that radius in a
 * bucket table; beyond that the probes would cost more than comparing every pair, which it
 * then does (such a distance pairs nearly everything anyway).
 */
import { CHUNK_BITS } from "./phash-index";
import { inlineWorker, onWorkerDeath } from "../shared/inline-worker";

const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let pairs;
self.onmessage = (event) => {
  const m = event.data;
  try {
    if (m.type === "start") pairs = findPairs(m.path, m.distance, m.batch, m.chunkBits);
    const next = pairs.next();
    postMessage(next.done ? { type: "done", indexed: next.value } : { type: "pairs", pairs: next.value });
  } catch (err) {
    postMessage({ type: "error", error: String((err && err.message) || err) });
  }
};
function popcount(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}
/** Every mask of \`bits\` bits with at most \`radius\` bits set. */
function masks(bits, radius) {
  const out = [];
  for (let m = 0; m < 1 << bits; m++) if (popcount(m) <= radius) out.push(m);
  return out;
}
function* findPairs(path, distance, batch, chunkBits) {
  const k = chunkBits.length;
  // Read row by row into small-integer arrays: a million BigInt row objects at once would not be.
  const idList = [], hiList = [], loList = [], chunkList = [];
  const db = new Database(path, { readonly: true });
  try {
    db.run("PRAGMA busy_timeout = 5000");
    const rows = db
      .query("SELECT p.blob_id AS id, p.hash AS hash FROM phash_index p JOIN blobs b ON b.id = p.blob_id WHERE p.chunk = 0 AND b.pending_delete = 0 ORDER BY p.blob_id")
      .safeIntegers(true);
    for (const row of rows.iterate()) {
      let u = BigInt.asUintN(64, row.hash);
      idList.push(Number(row.id));
      hiList.push(Number(u >> 32n) | 0);
      loList.push(Number(u & 0xffffffffn) | 0);
      for (let c = 0; c < k; c++) {
        chunkList.push(Number(u & ((1n << BigInt(chunkBits[c])) - 1n)));
        u >>= BigInt(chunkBits[c]);
      }
    }
  } finally {
    db.close();
  }
  const n = idList.length;
  const ids = Float64Array.from(idList), hi = Int32Array.from(hiList), lo = Int32Array.from(loList), chunks = Int32Array.from(chunkList);
  idList.length = hiList.length = loList.length = chunkList.length = 0;
  let out = [];
  const emit = (i, j, d) => out.push(ids[i], ids[j], d);
  const radius = Math.floor(distance / k);
  if (radius > 2) {
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const d = popcount(hi[i] ^ hi[j]) + popcount(lo[i] ^ lo[j]);
        if (d <= distance) emit(i, j, d);
      }
      if (out.length >= batch * 3) { yield out; out = []; }
    }
  } else {
    // Per chunk, a bucket table (counting sort): members of value v are order[start[v]..start[v+1]).
    const tables = chunkBits.map((bits, c) => {
      const start = new Int32Array((1 << bits) + 1);
      for (let i = 0; i < n; i++) start[chunks[i * k + c] + 1]++;
      for (let v = 0; v < 1 << bits; v++) start[v + 1] += start[v];
      const fill = start.slice(0, -1), order = new Int32Array(n);
      for (let i = 0; i < n; i++) order[fill[chunks[i * k + c]]++] = i;
      return { start, order, masks: masks(bits, radius) };
    });
    const seen = new Int32Array(n).fill(-1);
    for (let i = 0; i < n; i++) {
      for (let c = 0; c < k; c++) {
        const { start, order, masks: flips } = tables[c];
        const v = chunks[i * k + c];
        for (const flip of flips) {
          const w = v ^ flip;
          for (let p = start[w]; p < start[w + 1]; p++) {
            const j = order[p];
            if (j <= i || seen[j] === i) continue;
            seen[j] = i;
            const d = popcount(hi[i] ^ hi[j]) + popcount(lo[i] ^ lo[j]);
            if (d <= distance) emit(i, j, d);
          }
        }
      }
      if (out.length >= batch * 3) { yield out; out = []; }
    }
  }
  if (out.length) yield out;
  return n;
}`;

/** The server is stopping: the rescan runs again, whole, at the next round after the start. */
export class RescanStoppedError extends Error {
  constructor() {
    super("服务正在停止，相似图片重新扫描将在下次启动后重做");
  }
}

/** Pairs handed over per message (the main thread stores each batch in one transaction). */
const PAIRS_PER_BATCH = 1000;

/**
 * Calls `onPairs` with [blobA, blobB, distance, …] (blobA < blobB) for every pair of indexed,
 * not pending-delete blobs within `distance`, batch by batch; resolves with how many blobs the
 * worker read. Rejects when the worker fails or dies, or with RescanStoppedError when `signal` aborts.
 */
export function rescanPairsInWorker(dbPath: string, distance: number, onPairs: (triples: number[]) => void, signal?: AbortSignal): Promise<number> {
  if (signal?.aborted) return Promise.reject(new RescanStoppedError());
  const worker = inlineWorker(WORKER_SOURCE);
  return new Promise<number>((resolve, reject) => {
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", stop);
      worker.terminate();
      done();
    };
    const stop = () => settle(() => reject(new RescanStoppedError()));
    signal?.addEventListener("abort", stop);
    worker.onmessage = (event: MessageEvent<{ type: string; pairs?: number[]; indexed?: number; error?: string }>) => {
      const m = event.data;
      if (m.type === "pairs") {
        try {
          onPairs(m.pairs!);
        } catch (err) {
          settle(() => reject(err));
          return;
        }
        worker.postMessage({ type: "next" });
      } else if (m.type === "done") settle(() => resolve(m.indexed!));
      else settle(() => reject(new Error(m.error)));
    };
    onWorkerDeath(worker, (reason) => settle(() => reject(new Error(reason))));
    worker.postMessage({ type: "start", path: dbPath, distance, batch: PAIRS_PER_BATCH, chunkBits: [...CHUNK_BITS] });
  });
}
