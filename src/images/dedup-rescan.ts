/**
 * Near-duplicate pairs found off the event loop (dedup.ts): the full rescan after a raised
 * `dedup_phash_max_distance`, and, above the distance the index answers (MIH_MAX_DISTANCE),
 * each round's new blobs against the indexed ones and each other. A Bun Worker
 * (dedup-pairs-worker.ts) reads the hashes on its own read-only connection and hands the pairs
 * back a batch at a time; the next batch is computed only when the main thread asks for it,
 * so a large result never piles up in memory and each insert transaction stays small.
 */
import { PAIRS_WORKER_SOURCE } from "./dedup-pairs-worker";
import { CHUNK_BITS } from "./phash-index";
import { PAIRS_WORKER_SQL } from "./repos/phash";
import { inlineWorker, onWorkerDeath } from "../shared/inline-worker";

/** The server is stopping: the worker's round is cut short (dedup.ts says what happens next). */
export class RescanStoppedError extends Error {
  constructor() {
    super("服务正在停止，相似图片重新扫描将在下次启动后重做");
  }
}

/** Pairs handed over per message (the main thread stores each batch in ~10 ms slices, then asks for the next). */
const PAIRS_PER_BATCH = 1000;

/**
 * Pairs a blob gets at its turn in a scan: the nearest PAIRS_PER_BLOB (ties: the lower blob id)
 * of the blobs within the distance that were compared before it. A burst of 1,300 near-identical
 * uploads otherwise stored ~350k pairs (every one with every other), a list nobody reviews and
 * whose counting and paging slowed with it; with the cap such a cluster stays connected (each
 * blob points at its nearest earlier ones) at ≤20 pairs a blob. The index path (dedup.ts) and
 * the worker below apply the same rule.
 */
export const PAIRS_PER_BLOB = 20;

/** The blobs new to an incremental round: ids in (after, upTo], and the waiting ids (at or below `after`). */
export interface FreshBlobs {
  after: number;
  upTo: number;
  waiting: number[];
}

export interface PairScan {
  /** Blobs the worker read (indexed and fresh). */
  blobs: number;
  /** The fresh blobs it compared (ready when read), in the order read. */
  fresh: number[];
  /** Fresh-range or waiting blobs that were not ready when read: they wait for a later round. */
  skipped: number[];
}

/**
 * Calls `onPairs` with [blobA, blobB, distance, …] (blobA < blobB), batch by batch, for the pairs
 * within `distance`, each blob in turn with its PAIRS_PER_BLOB nearest among the blobs before it:
 * of indexed, not pending-delete blobs, in id order (with `resumeAfter`, only the blobs after it
 * are paired, with all before them); or, with `fresh`, each ready fresh blob in the scan's order
 * with the indexed blobs and the fresh ones before it. `through` names the last blob whose pairs
 * are all handed over once the batch is stored. The next batch is asked
 * for once `onPairs` (and the promise it returns) is done. Rejects when the worker fails or dies,
 * or with RescanStoppedError when `signal` aborts.
 */
export function pairsInWorker(
  dbPath: string,
  distance: number,
  onPairs: (triples: number[], through: number) => void | Promise<void>,
  signal?: AbortSignal,
  fresh?: FreshBlobs,
  resumeAfter?: number,
): Promise<PairScan> {
  if (signal?.aborted) return Promise.reject(new RescanStoppedError());
  const worker = inlineWorker(PAIRS_WORKER_SOURCE);
  return new Promise<PairScan>((resolve, reject) => {
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
    worker.onmessage = (event: MessageEvent<{ type: string; pairs?: number[]; through?: number; result?: PairScan; error?: string }>) => {
      const m = event.data;
      if (m.type === "pairs") {
        Promise.resolve()
          .then(() => onPairs(m.pairs!, m.through!))
          .then(
            () => settled || worker.postMessage({ type: "next" }),
            (err) => settle(() => reject(err)),
          );
      } else if (m.type === "done") settle(() => resolve(m.result!));
      else settle(() => reject(new Error(m.error)));
    };
    onWorkerDeath(worker, (reason) => settle(() => reject(new Error(reason))));
    worker.postMessage({
      type: "start",
      path: dbPath,
      distance,
      batch: PAIRS_PER_BATCH,
      cap: PAIRS_PER_BLOB,
      chunkBits: [...CHUNK_BITS],
      fresh,
      resumeAfter,
      sql: PAIRS_WORKER_SQL,
    });
  });
}
