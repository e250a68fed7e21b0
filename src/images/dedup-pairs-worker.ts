/**
 * Source of the worker that finds near-duplicate pairs (dedup-rescan.ts starts it). It runs in
 * a Bun Worker from text (shared/inline-worker.ts), so it may import only what the runtime
 * provides.
 *
 * It opens its own read-only connection and, in one read transaction, loads every indexed,
 * not pending-delete hash (table phash_index) into typed arrays, about 50 bytes a blob. With
 * `fresh` it also reads the blobs new to the scan (ids in (after, upTo], and the waiting ids)
 * that are ready (not pending delete, a valid hash); these go after the indexed ones, and an
 * indexed blob that is also fresh (a revived one) counts as fresh only. The outer loop then
 * runs over the fresh blobs alone, each in turn with the blobs before it (every indexed one and
 * the fresh ones read before it), as the index path compares a round's blobs one after another;
 * without `fresh` every blob is outer, in id order (the full rescan after a raised distance).
 * Each outer blob keeps its `cap` nearest candidates within the distance (ties: the lower id;
 * dedup-rescan.ts PAIRS_PER_BLOB). Pairs come back as [blobA, blobB, distance, …] with
 * blobA < blobB, `batch` at a time, each batch computed when the main thread asks. A batch ends
 * with an outer blob's last pair and names that blob (`through`): in a full rescan every blob up
 * to it has all its pairs in this batch or an earlier one, so a stopped rescan can go on after it
 * (`resumeAfter`).
 *
 * Exact for every allowed distance d (0–64), by the generalised pigeonhole rule of multi-index
 * hashing: two hashes within d differ in at most ⌊d/7⌋ bits in at least one of the 7 chunks.
 * Up to d = 20 (radius ≤ 2) the worker probes, per chunk, every value within that radius in a
 * bucket table; beyond that the probes would cost more than comparing every pair, which it
 * then does (such a distance pairs nearly everything anyway).
 *
 * The last answer is { blobs, fresh, skipped }: how many blobs were read, the fresh blobs
 * compared, and the ones in the fresh range or waiting list that were not ready (they wait).
 */
export const PAIRS_WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let pairs;
self.onmessage = (event) => {
  const m = event.data;
  try {
    if (m.type === "start") pairs = findPairs(m);
    const next = pairs.next();
    postMessage(next.done ? { type: "done", result: next.value } : { type: "pairs", pairs: next.value.pairs, through: next.value.through });
  } catch (err) {
    postMessage({ type: "error", error: String((err && err.message) || err) });
  }
};
const HEX = /^[0-9a-fA-F]{16}$/;
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
function* findPairs({ path, distance, batch, cap, chunkBits, fresh, resumeAfter, sql }) {
  const k = chunkBits.length;
  // Read row by row into small-integer arrays: a million BigInt row objects at once would not be.
  const idList = [], hiList = [], loList = [], chunkList = [];
  const push = (id, hash) => {
    let u = BigInt.asUintN(64, hash);
    idList.push(id);
    hiList.push(Number(u >> 32n) | 0);
    loList.push(Number(u & 0xffffffffn) | 0);
    for (let c = 0; c < k; c++) {
      chunkList.push(Number(u & ((1n << BigInt(chunkBits[c])) - 1n)));
      u >>= BigInt(chunkBits[c]);
    }
  };
  const freshIds = [], freshHex = [], skipped = [];
  const isFresh = new Set();
  const db = new Database(path, { readonly: true });
  try {
    db.run("PRAGMA busy_timeout = 5000");
    db.run("BEGIN");
    if (fresh) {
      const take = (row) => {
        if (isFresh.has(row.id)) return;
        if (row.pending_delete === 0 && HEX.test(row.phash)) {
          isFresh.add(row.id);
          freshIds.push(row.id);
          freshHex.push(row.phash);
        } else if (row.phash === "" || row.pending_delete !== 0) skipped.push(row.id); // may become ready
      };
      const waiting = db.query(sql.waiting);
      for (const row of waiting.iterate(JSON.stringify(fresh.waiting))) take(row);
      const range = db.query(sql.range);
      for (const row of range.iterate(fresh.after, fresh.upTo)) take(row);
    }
    const rows = db
      .query(sql.indexed)
      .safeIntegers(true);
    for (const row of rows.iterate()) {
      const id = Number(row.id);
      if (!isFresh.has(id)) push(id, row.hash);
    }
    db.run("COMMIT");
  } finally {
    db.close();
  }
  // Outer blobs are [from, n): the fresh ones, or every blob for a full rescan (those after
  // \`resumeAfter\` when a stopped rescan goes on: the ones up to it have their pairs stored).
  let from = fresh ? idList.length : 0;
  for (let f = 0; f < freshIds.length; f++) push(freshIds[f], BigInt("0x" + freshHex[f]));
  freshHex.length = 0;
  const n = idList.length;
  const ids = Float64Array.from(idList), hi = Int32Array.from(hiList), lo = Int32Array.from(loList), chunks = Int32Array.from(chunkList);
  idList.length = hiList.length = loList.length = chunkList.length = 0;
  if (!fresh && resumeAfter) while (from < n && ids[from] <= resumeAfter) from++;
  let out = [];
  // The outer i's candidates are the blobs before it (j < i); it keeps the cap nearest, sorted by (distance, id).
  const bestD = new Int32Array(cap), bestJ = new Int32Array(cap);
  let kept = 0;
  const consider = (j, d) => {
    const id = ids[j];
    if (kept === cap && (d > bestD[cap - 1] || (d === bestD[cap - 1] && id > ids[bestJ[cap - 1]]))) return;
    let p = kept < cap ? kept++ : cap - 1;
    for (; p > 0 && (bestD[p - 1] > d || (bestD[p - 1] === d && ids[bestJ[p - 1]] > id)); p--) {
      bestD[p] = bestD[p - 1];
      bestJ[p] = bestJ[p - 1];
    }
    bestD[p] = d;
    bestJ[p] = j;
  };
  const emit = (i) => {
    for (let q = 0; q < kept; q++) {
      const j = bestJ[q];
      if (ids[i] < ids[j]) out.push(ids[i], ids[j], bestD[q]);
      else out.push(ids[j], ids[i], bestD[q]);
    }
    kept = 0;
  };
  const radius = Math.floor(distance / k);
  if (radius > 2) {
    for (let i = from; i < n; i++) {
      for (let j = 0; j < i; j++) {
        const d = popcount(hi[i] ^ hi[j]) + popcount(lo[i] ^ lo[j]);
        if (d <= distance) consider(j, d);
      }
      emit(i);
      if (out.length >= batch * 3) { yield { pairs: out, through: ids[i] }; out = []; }
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
    for (let i = from; i < n; i++) {
      for (let c = 0; c < k; c++) {
        const { start, order, masks: flips } = tables[c];
        const v = chunks[i * k + c];
        for (const flip of flips) {
          const w = v ^ flip;
          for (let p = start[w]; p < start[w + 1]; p++) {
            const j = order[p];
            if (j >= i || seen[j] === i) continue;
            seen[j] = i;
            const d = popcount(hi[i] ^ hi[j]) + popcount(lo[i] ^ lo[j]);
            if (d <= distance) consider(j, d);
          }
        }
      }
      emit(i);
      if (out.length >= batch * 3) { yield { pairs: out, through: ids[i] }; out = []; }
    }
  }
  if (out.length) yield { pairs: out, through: ids[n - 1] };
  return { blobs: n, fresh: freshIds, skipped };
}`;
