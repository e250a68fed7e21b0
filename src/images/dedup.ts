// Similar-image review (spec 3.5, 4.9): a periodic scan pairs blobs whose perceptual hashes
// are close, and an admin either merges a pair (every reference moves to the kept blob) or
// dismisses it. Identical bytes never get here: they already share one blob by sha256.
import { Conflict, Invalid, NotFound } from "../errors";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import { sqlTime } from "../db/time";
import { audit, type AuditActor } from "../ops/audit";
import { scheduleBlobDelete } from "./delete";
import { pairsInWorker, RescanStoppedError } from "./dedup-rescan";
import { MIH_MAX_DISTANCE, PHASH_HEX, PhashIndex, phashToInt } from "./phash-index";
import {
  anyReadyBetween,
  type CandidateRow,
  candidateById,
  dismissOtherPairsOf,
  insertCandidate,
  maxBlobId,
  moveImagesToBlob,
  notReadyBlobIds,
  type ScanBlob,
  scanBlob,
  scanBlobsAfter,
  setCandidateState,
} from "./repos/dedup";

/** `meta` row remembering how far the scan got, so each round only compares what is new. */
const WATERMARK_KEY = "dedup_scan_watermark";
/** New blobs indexed per transaction before yielding, so a first scan of a large library never stalls requests. */
const SLICE = 100;

interface Watermark {
  /** Every blob with a higher id is new to the scan. */
  after: number;
  /** Blobs at or below `after` that could not be compared last time (no hash yet, or pending delete). */
  waiting: number[];
  /**
   * The `dedup_phash_max_distance` the blobs at or below `after` were compared with (absent in
   * watermarks of earlier versions: then the current one). A larger setting rescans them.
   */
  distance?: number;
}

function readWatermark(app: AppContext): Watermark {
  const value = readMeta(app.db, WATERMARK_KEY);
  if (value === undefined) return { after: 0, waiting: [] };
  try {
    const parsed = JSON.parse(value) as Watermark;
    if (Number.isInteger(parsed.after) && Array.isArray(parsed.waiting) && (parsed.distance === undefined || Number.isInteger(parsed.distance))) return parsed;
  } catch {
    // A damaged row only costs one full re-scan: pairs already stored are ignored.
  }
  return { after: 0, waiting: [] };
}

function saveWatermark(app: AppContext, mark: Watermark) {
  writeMeta(app.db, WATERMARK_KEY, JSON.stringify(mark));
}

/** Blobs at or below `after` that cannot be compared yet. */
const notReady = (app: AppContext, after: number): number[] => notReadyBlobIds(app.db, after);

type Candidate = ScanBlob;

const ready = (b: Candidate) => !b.pending_delete && PHASH_HEX.test(b.phash);

/**
 * One scan round, incremental (multi-index hashing, see phash-index.ts): each blob hashed
 * since the previous round, and each waiting one now ready, probes the index for blobs within
 * `dedup_phash_max_distance`, stores every pair not already known (in any state) as a pending
 * candidate with blob_a < blob_b, then joins the index. New blobs are taken a slice at a time
 * with a yield in between, and the watermark is saved after each slice, so a first scan of a
 * million blobs runs in small steps and resumes where it stopped. A round with nothing new
 * reads a few index rows and writes nothing. Above MIH_MAX_DISTANCE the index cannot answer,
 * and the new blobs are compared in a worker instead (scanFreshInWorker).
 */
export async function scanRound(app: AppContext): Promise<{ compared: number; found: number }> {
  const maxDistance = app.settings.get().dedup_phash_max_distance;
  const mark = readWatermark(app);
  const index = new PhashIndex(app.db);
  let compared = 0;
  let found = 0;
  // A raised distance: the blobs already indexed were compared with a smaller one. Every pair
  // within the new one is found again, off the loop; pairs already stored (in any state) stay.
  if (mark.after > 0 && maxDistance > (mark.distance ?? maxDistance)) {
    try {
      found += await rescanIndexed(app, maxDistance);
    } catch (err) {
      if (!(err instanceof RescanStoppedError)) throw err;
      app.log.info(err.message);
      return { compared, found };
    }
    mark.distance = maxDistance;
    saveWatermark(app, mark);
  }
  // Beyond what the index answers, comparing a new blob means comparing it with every hash: in the worker.
  if (maxDistance > MIH_MAX_DISTANCE) {
    try {
      const fresh = await scanFreshInWorker(app, mark, maxDistance, index);
      compared += fresh.compared;
      found += fresh.found;
    } catch (err) {
      if (!(err instanceof RescanStoppedError)) throw err;
      app.log.info(err.message);
      return { compared, found };
    }
    if (found) app.log.info("相似图片扫描完成", { compared, found });
    return { compared, found };
  }
  const compare = (blob: Candidate) => {
    const hash = phashToInt(blob.phash);
    const now = sqlTime();
    for (const n of index.near(hash, maxDistance, blob.id)) {
      found += insertCandidate(app.db, Math.min(blob.id, n.blobId), Math.max(blob.id, n.blobId), n.distance, now);
    }
    index.add(blob.id, hash);
    compared++;
  };

  const waitingNow = mark.waiting.map((id) => scanBlob(app.db, id)).filter((b): b is Candidate => !!b && ready(b));
  if (waitingNow.length) app.db.transaction(() => waitingNow.forEach(compare))();

  let after = mark.after;
  let changed = waitingNow.length > 0;
  for (;;) {
    const slice = scanBlobsAfter(app.db, after, SLICE);
    if (!slice.length) break;
    app.db.transaction(() => {
      for (const blob of slice) if (ready(blob)) compare(blob);
      after = slice.at(-1)!.id;
      saveWatermark(app, { after, waiting: notReady(app, after), distance: maxDistance });
    })();
    changed = true;
    if (slice.length < SLICE) break;
    await Bun.sleep(1);
  }
  // Blobs compared earlier that went pending-delete wait again: if revived, they are compared anew.
  const waiting = notReady(app, after);
  // A lowered distance is recorded too, so raising it again later rescans what was compared meanwhile.
  if (changed || waiting.join() !== mark.waiting.join() || mark.distance !== maxDistance) saveWatermark(app, { after, waiting, distance: maxDistance });
  if (found) app.log.info("相似图片扫描完成", { compared, found });
  return { compared, found };
}

const rounds = new WeakMap<AppContext, Promise<unknown>>();
const stopping = new WeakMap<AppContext, AbortController>();

/** At shutdown: a rescan in progress ends now (its worker is terminated) instead of holding the stop. */
export function stopRescans(app: AppContext): void {
  if (!stopping.has(app)) stopping.set(app, new AbortController());
  stopping.get(app)!.abort();
}

/** scanRound, one at a time: the loop's rounds and the one a changed distance asks for never interleave. */
export function queueScanRound(app: AppContext): Promise<{ compared: number; found: number }> {
  const next = (rounds.get(app) ?? Promise.resolve()).catch(() => undefined).then(() => scanRound(app));
  rounds.set(app, next);
  return next;
}

/** Stores a batch of [blobA, blobB, distance, …] in one transaction; returns how many pairs were new. */
function storePairs(app: AppContext, triples: number[]): number {
  const now = sqlTime();
  let found = 0;
  app.db.transaction(() => {
    for (let i = 0; i < triples.length; i += 3) found += insertCandidate(app.db, triples[i]!, triples[i + 1]!, triples[i + 2]!, now);
  })();
  return found;
}

function stopSignal(app: AppContext): AbortSignal {
  if (!stopping.has(app)) stopping.set(app, new AbortController());
  return stopping.get(app)!.signal;
}

/**
 * The incremental round above MIH_MAX_DISTANCE: the blobs new since the watermark (up to the
 * highest id now; later ones wait for the next round) and the waiting ones now ready are
 * compared in the worker with every indexed hash and with each other. Only once their pairs
 * are stored do they join the index (a slice at a time, with a yield in between) and the
 * watermark move on, so a crash or a stop in between redoes the round and loses no pair.
 */
async function scanFreshInWorker(app: AppContext, mark: Watermark, maxDistance: number, index: PhashIndex): Promise<{ compared: number; found: number }> {
  const upTo = Math.max(mark.after, maxBlobId(app.db));
  const waitingReady = mark.waiting.some((id) => {
    const b = scanBlob(app.db, id);
    return !!b && ready(b);
  });
  if (!waitingReady && !anyReadyBetween(app.db, mark.after, upTo)) {
    // Nothing to compare: only the waiting list and the distance can have changed.
    const waiting = notReady(app, upTo);
    if (upTo !== mark.after || waiting.join() !== mark.waiting.join() || mark.distance !== maxDistance)
      saveWatermark(app, { after: upTo, waiting, distance: maxDistance });
    return { compared: 0, found: 0 };
  }
  let found = 0;
  const signal = stopSignal(app);
  const scan = await pairsInWorker(app.db.filename, maxDistance, (triples) => (found += storePairs(app, triples)), signal, {
    after: mark.after,
    upTo,
    waiting: mark.waiting,
  });
  for (let i = 0; i < scan.fresh.length; i += SLICE) {
    app.db.transaction(() => {
      for (const id of scan.fresh.slice(i, i + SLICE)) {
        const blob = scanBlob(app.db, id);
        if (blob && PHASH_HEX.test(blob.phash)) index.add(id, phashToInt(blob.phash));
      }
    })();
    await Bun.sleep(1);
    if (signal.aborted) throw new RescanStoppedError();
  }
  // Blobs not ready when the worker read them wait, even if they became ready since.
  const waiting = [...new Set([...notReady(app, upTo), ...scan.skipped])].sort((a, b) => a - b);
  saveWatermark(app, { after: upTo, waiting, distance: maxDistance });
  return { compared: scan.fresh.length, found };
}

/**
 * Stores every pair of indexed blobs within `maxDistance` (dedup-rescan.ts computes them in a
 * worker); each batch of pairs is one small transaction. Returns how many pairs were new.
 */
async function rescanIndexed(app: AppContext, maxDistance: number): Promise<number> {
  app.log.info("相似判定阈值已调大，正在后台重新扫描已索引的图片", { distance: maxDistance });
  let found = 0;
  const scan = await pairsInWorker(app.db.filename, maxDistance, (triples) => (found += storePairs(app, triples)), stopSignal(app));
  app.log.info("相似图片重新扫描完成", { distance: maxDistance, blobs: scan.blobs, found });
  return found;
}

/** The pair awaiting review: NotFound for an unknown id, Conflict once it was decided. */
function pendingCandidate(app: AppContext, id: number): CandidateRow {
  const c = candidateById(app.db, id);
  if (!c) throw new NotFound("相似候选不存在");
  if (c.state !== "pending") throw new Conflict("该相似候选已处理");
  return c;
}

/**
 * Merges a pending pair into `keepBlobId`: in one transaction every image of the other blob
 * is re-pointed, its references move to the kept blob, and the other blob waits out
 * `delete_grace_minutes` before its physical delete (as in delete.ts). Other pending pairs
 * of the removed blob are dismissed since it no longer has references. Re-pointed images
 * keep their URLs and are deliberately not CDN-purged (spec 6): they still resolve.
 */
export function merge(app: AppContext, candidateId: number, keepBlobId: number, actor: AuditActor): void {
  const moved = app.db.transaction((): string[] => {
    const c = pendingCandidate(app, candidateId);
    if (keepBlobId !== c.blob_a && keepBlobId !== c.blob_b) throw new Invalid("keep_blob_id 必须是该候选中的一方");
    const removedBlobId = keepBlobId === c.blob_a ? c.blob_b : c.blob_a;
    const keep = app.images.blob(keepBlobId);
    const removed = app.images.blob(removedBlobId);
    if (!keep || !removed || keep.pending_delete || removed.pending_delete) throw new Conflict("候选中的图片已被删除，无法合并");

    const moved = moveImagesToBlob(app.db, removedBlobId, keepBlobId);
    scheduleBlobDelete(app, removedBlobId);
    setCandidateState(app.db, candidateId, "merged");
    dismissOtherPairsOf(app.db, candidateId, removedBlobId);
    audit(app.db, actor, "dedup.merge", candidateId, { keep_blob_id: keepBlobId, removed_blob_id: removedBlobId, images: moved.length });
    return moved;
  })();
  // Delivery caches image rows by id: the re-pointed ones must be read again.
  for (const id of moved) app.lookups.forget(id);
}

/** The pair is no longer suggested; a later scan never re-adds it (the pair stays stored). */
export function dismiss(app: AppContext, candidateId: number, actor: AuditActor): void {
  app.db.transaction(() => {
    const c = pendingCandidate(app, candidateId);
    setCandidateState(app.db, candidateId, "dismissed");
    audit(app.db, actor, "dedup.dismiss", candidateId, { blob_a: c.blob_a, blob_b: c.blob_b });
  })();
}
