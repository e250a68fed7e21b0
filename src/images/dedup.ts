// Similar-image review (spec 3.5, 4.9): a periodic scan pairs blobs whose perceptual hashes
// are close, and an admin either merges a pair (every reference moves to the kept blob) or
// dismisses it. Identical bytes never get here: they already share one blob by sha256.
import { Conflict, Invalid, NotFound } from "../errors";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import { sqlTime } from "../db/time";
import { audit, type AuditActor } from "../ops/audit";
import { scheduleBlobDelete } from "./delete";
import { SLICE_MS, drainInSlices } from "../db/sliced";
import { PAIRS_PER_BLOB, pairsInWorker, RescanStoppedError } from "./dedup-rescan";
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
  pairPartners,
  type ScanBlob,
  scanBlob,
  scanBlobsAfter,
  setCandidateState,
} from "./repos/dedup";
import { inWriteTransaction } from "../db/write-transaction";

/** `meta` row remembering how far the scan got, so each round only compares what is new. */
const WATERMARK_KEY = "dedup_scan_watermark";
/** New blobs read per statement (a slice compares as many of them as fit in its time). */
const READ_BLOBS = 100;
/** Fresh blobs a worker round indexes per statement group (7 index rows each); drainInSlices fits them to ~10 ms. */
const INDEX_STEP = 10;
/** Pairs stored per statement group of a worker batch; drainInSlices fits them to ~10 ms. */
const STORE_STEP = 50;

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
  /**
   * A rescan at `distance` under way (after a raised setting): every indexed blob up to `through`
   * has its pairs stored. A stop keeps it, so the next start goes on from there instead of
   * rescanning a million hashes from the first; any other save of the watermark (a round at
   * another distance, which may have indexed blobs the rescan never saw) drops it.
   */
  rescan?: { distance: number; through: number };
}

const validRescan = (r: Watermark["rescan"]) => r === undefined || (Number.isInteger(r?.distance) && Number.isInteger(r?.through));

function readWatermark(app: AppContext): Watermark {
  const value = readMeta(app.db, WATERMARK_KEY);
  if (value === undefined) return { after: 0, waiting: [] };
  try {
    const parsed = JSON.parse(value) as Watermark;
    if (
      Number.isInteger(parsed.after) &&
      Array.isArray(parsed.waiting) &&
      (parsed.distance === undefined || Number.isInteger(parsed.distance)) &&
      validRescan(parsed.rescan)
    )
      return parsed;
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
 * One scan round, incremental (multi-index hashing, see phash-index.ts): each waiting blob now
 * ready, then each blob hashed since the previous round, in turn probes the index for blobs
 * within `dedup_phash_max_distance`, stores its PAIRS_PER_BLOB nearest (ties: lower id) not
 * already known (in any state) as pending candidates with blob_a < blob_b, then joins the index.
 * Blobs are compared in time slices (~10 ms, commit included) with a turn of the loop between,
 * and each slice saves the watermark with its pairs (the waiting blobs not reached yet stay
 * waiting), so a burst of near-identical uploads or a first scan of a million blobs never holds
 * the loop for long, and a stop resumes where it was without losing a pair. A round with nothing
 * new reads a few index rows and writes nothing. Above MIH_MAX_DISTANCE the index cannot answer,
 * and the new blobs are compared in a worker instead (scanFreshInWorker).
 */
export async function scanRound(app: AppContext): Promise<{ compared: number; found: number }> {
  const maxDistance = app.settings.get().dedup_phash_max_distance;
  let mark = readWatermark(app);
  const index = new PhashIndex(app.db);
  let compared = 0;
  let found = 0;
  // A raised distance: the blobs already indexed were compared with a smaller one. Every pair
  // within the new one is found again, off the loop; pairs already stored (in any state) stay.
  if (mark.after > 0 && maxDistance > (mark.distance ?? maxDistance)) {
    const resumeAfter = mark.rescan?.distance === maxDistance ? mark.rescan.through : undefined;
    try {
      found += await rescanIndexed(app, maxDistance, resumeAfter);
    } catch (err) {
      if (!(err instanceof RescanStoppedError)) throw err;
      const through = readWatermark(app).rescan?.through;
      app.log.info("服务正在停止，相似图片重新扫描将在下次启动后继续", { distance: maxDistance, through: through ?? 0 });
      return { compared, found };
    }
    // Read again: a merge meanwhile may have added a blob to the waiting list.
    const { rescan: _done, ...current } = readWatermark(app);
    mark = { ...current, distance: maxDistance };
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
    for (const n of index.near(hash, maxDistance, blob.id, PAIRS_PER_BLOB))
      found += insertCandidate(app.db, Math.min(blob.id, n.blobId), Math.max(blob.id, n.blobId), n.distance, now);
    index.add(blob.id, hash);
    compared++;
  };

  // Waiting blobs first (in id order, as the worker reads them), then the new ones by id.
  let waitingLeft = mark.waiting.slice();
  let after = mark.after;
  let changed = false;
  let commitMs = 0;
  const signal = stopSignal(app);
  for (let more = true; more; ) {
    const started = performance.now();
    let worked = 0;
    let statementsDone = started;
    inWriteTransaction(app.db, () => {
      // The statements get what is left of the slice after the last commit's time.
      const budget = Math.max(1, SLICE_MS - commitMs);
      let fresh: ScanBlob[] = [];
      while (worked === 0 || performance.now() - started < budget) {
        if (waitingLeft.length) {
          const blob = scanBlob(app.db, waitingLeft[0]!);
          waitingLeft = waitingLeft.slice(1);
          if (blob && ready(blob)) compare(blob);
          worked++;
          continue;
        }
        if (!fresh.length) fresh = scanBlobsAfter(app.db, after, READ_BLOBS);
        const blob = fresh.shift();
        if (!blob) {
          more = false;
          break;
        }
        if (ready(blob)) compare(blob);
        after = blob.id;
        worked++;
      }
      if (worked) saveWatermark(app, { after, waiting: [...new Set([...waitingLeft, ...notReady(app, after)])].sort((a, b) => a - b), distance: maxDistance });
      statementsDone = performance.now();
    });
    if (worked) changed = true;
    commitMs = Math.min(SLICE_MS / 2, performance.now() - statementsDone);
    if (!more) break;
    await Bun.sleep(1);
    if (signal.aborted) {
      app.log.info("服务正在停止，相似图片扫描将在下次启动后继续", { compared });
      return { compared, found };
    }
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

/** Stores a batch of [blobA, blobB, distance, …] in ~10 ms transactions with a turn of the loop between; returns how many pairs were new. */
async function storePairs(app: AppContext, triples: number[]): Promise<number> {
  const now = sqlTime();
  let found = 0;
  let at = 0;
  await drainInSlices(
    app.db,
    (limit) => {
      const end = Math.min(triples.length, at + limit * 3);
      const stored = (end - at) / 3;
      for (; at < end; at += 3) found += insertCandidate(app.db, triples[at]!, triples[at + 1]!, triples[at + 2]!, now);
      return stored;
    },
    STORE_STEP,
  );
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
  const scan = await pairsInWorker(
    app.db.filename,
    maxDistance,
    async (triples) => {
      found += await storePairs(app, triples);
    },
    signal,
    {
      after: mark.after,
      upTo,
      waiting: mark.waiting,
    },
  );
  let at = 0;
  const addToIndex = (limit: number) => {
    const ids = scan.fresh.slice(at, at + limit);
    at += ids.length;
    for (const id of ids) {
      const blob = scanBlob(app.db, id);
      if (blob && PHASH_HEX.test(blob.phash)) index.add(id, phashToInt(blob.phash));
    }
    return ids.length;
  };
  // Stopped part way: the watermark did not move, so the next round compares them again (pairs and index rows are kept once).
  await drainInSlices(app.db, addToIndex, INDEX_STEP, { stopped: () => signal.aborted });
  if (signal.aborted) throw new RescanStoppedError();
  // Blobs not ready when the worker read them wait, even if they became ready since.
  const waiting = [...new Set([...notReady(app, upTo), ...scan.skipped])].sort((a, b) => a - b);
  saveWatermark(app, { after: upTo, waiting, distance: maxDistance });
  return { compared: scan.fresh.length, found };
}

/**
 * Stores the pairs of indexed blobs within `maxDistance`, each blob (in id order) with its
 * PAIRS_PER_BLOB nearest of the lower ids (dedup-rescan.ts computes them in a worker); each
 * batch is stored in ~10 ms slices, then the watermark notes how far the rescan got, and a
 * rescan stopped part way goes on after `resumeAfter`. Returns how many pairs were new.
 */
async function rescanIndexed(app: AppContext, maxDistance: number, resumeAfter: number | undefined): Promise<number> {
  if (resumeAfter === undefined) app.log.info("相似判定阈值已调大，正在后台重新扫描已索引的图片", { distance: maxDistance });
  else app.log.info("继续上次中断的相似图片重新扫描", { distance: maxDistance, after: resumeAfter });
  let found = 0;
  const scan = await pairsInWorker(
    app.db.filename,
    maxDistance,
    async (triples, through) => {
      found += await storePairs(app, triples);
      // After the batch's pairs: a stop from here on goes on after `through`, losing no pair.
      saveWatermark(app, { ...readWatermark(app), rescan: { distance: maxDistance, through } });
    },
    stopSignal(app),
    undefined,
    resumeAfter,
  );
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
  const moved = inWriteTransaction(app.db, (): string[] => {
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
    refillPairs(app, keepBlobId);
    audit(app.db, actor, "dedup.merge", candidateId, { keep_blob_id: keepBlobId, removed_blob_id: removedBlobId, images: moved.length });
    return moved;
  });
  // Delivery caches image rows by id: the re-pointed ones must be read again.
  for (const id of moved) app.lookups.forget(id);
}

/**
 * After a merge, pairs the kept blob with the nearest live blobs it has no pair with yet, until it
 * has PAIRS_PER_BLOB pending pairs again. The scan gives each blob only its nearest few, so in a
 * large cluster of copies some were paired only with blobs that merges have since removed (their
 * pairs dismissed with them): without this they would never be listed again, copies of the kept
 * image left unmerged for good. A pair in any state counts as known (a dismissed pair stays
 * dismissed). Index probes, within the merge's transaction; above MIH_MAX_DISTANCE the index cannot
 * answer, so the kept blob waits for the next round instead, which compares it in the worker.
 */
function refillPairs(app: AppContext, blobId: number): void {
  const blob = scanBlob(app.db, blobId);
  if (!blob || !ready(blob)) return;
  const maxDistance = app.settings.get().dedup_phash_max_distance;
  if (maxDistance > MIH_MAX_DISTANCE) {
    const mark = readWatermark(app);
    if (blobId <= mark.after && !mark.waiting.includes(blobId)) saveWatermark(app, { ...mark, waiting: [...mark.waiting, blobId].sort((a, b) => a - b) });
    return;
  }
  const { partners, pending } = pairPartners(app.db, blobId);
  let missing = PAIRS_PER_BLOB - pending;
  if (missing <= 0) return;
  const now = sqlTime();
  // Enough neighbours that, after skipping the known ones, `missing` new ones are among them if they exist.
  for (const n of new PhashIndex(app.db).near(phashToInt(blob.phash), maxDistance, blobId, partners.size + missing)) {
    if (missing === 0) break;
    if (partners.has(n.blobId)) continue;
    missing -= insertCandidate(app.db, Math.min(blobId, n.blobId), Math.max(blobId, n.blobId), n.distance, now);
  }
}

/** The pair is no longer suggested; a later scan never re-adds it (the pair stays stored). */
export function dismiss(app: AppContext, candidateId: number, actor: AuditActor): void {
  inWriteTransaction(app.db, () => {
    const c = pendingCandidate(app, candidateId);
    setCandidateState(app.db, candidateId, "dismissed");
    audit(app.db, actor, "dedup.dismiss", candidateId, { blob_a: c.blob_a, blob_b: c.blob_b });
  });
}
