// Similar-image review (spec 3.5, 4.9): a periodic scan pairs blobs whose perceptual hashes
// are close, and an admin either merges a pair (every reference moves to the kept blob) or
// dismisses it. Identical bytes never get here: they already share one blob by sha256.
import { Conflict, Invalid, NotFound } from "../errors";
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { audit, type AuditActor } from "../ops/audit";
import { scheduleBlobDelete } from "./delete";

/** `meta` row remembering how far the scan got, so each round only compares what is new. */
const WATERMARK_KEY = "dedup_scan_watermark";
/** Fresh blobs compared per slice before yielding, so a large first scan never stalls requests. */
const SLICE = 200;

interface Watermark {
  /** Every blob with a higher id is new to the scan. */
  after: number;
  /** Blobs at or below `after` that could not be compared last time (no hash yet, or pending delete). */
  waiting: number[];
}

interface Hashed {
  id: number;
  hi: number;
  lo: number;
}

function readWatermark(app: AppContext): Watermark {
  const row = app.db.query<{ value: string }, [string]>("SELECT value FROM meta WHERE key = ?").get(WATERMARK_KEY);
  if (!row) return { after: 0, waiting: [] };
  try {
    const parsed = JSON.parse(row.value) as Watermark;
    if (Number.isInteger(parsed.after) && Array.isArray(parsed.waiting)) return parsed;
  } catch {
    // A damaged row only costs one full re-scan: pairs already stored are ignored.
  }
  return { after: 0, waiting: [] };
}

/** Population count of a 32-bit value (SWAR); Numbers keep the inner loop far cheaper than BigInt. */
function popcount32(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

function split(id: number, hex: string): Hashed {
  return { id, hi: parseInt(hex.slice(0, 8), 16) >>> 0, lo: parseInt(hex.slice(8, 16), 16) >>> 0 };
}

/**
 * One scan round: blobs hashed since the previous round are compared against every hashed
 * live blob, and each pair within `dedup_phash_max_distance` not already known (in any
 * state) is stored as a pending candidate with blob_a < blob_b. The snapshot and the next
 * watermark are taken together before any await, so a hash stored mid-round is picked up
 * next round; the watermark is only saved at the end, so an interrupted round is redone.
 */
export async function scanRound(app: AppContext): Promise<{ compared: number; found: number }> {
  const maxDistance = app.settings.get().dedup_phash_max_distance;
  const mark = readWatermark(app);
  const rows = app.db
    .query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs WHERE phash != '' AND pending_delete = 0 ORDER BY id")
    .all()
    .filter((r) => /^[0-9a-fA-F]{16}$/.test(r.phash));
  const waiting = new Set(mark.waiting);
  const all = rows.map((r) => split(r.id, r.phash));
  const fresh = all.filter((b) => b.id > mark.after || waiting.has(b.id));
  const freshIds = new Set(fresh.map((b) => b.id));
  const next: Watermark = {
    after: app.db.query<{ n: number }, []>("SELECT COALESCE(MAX(id), 0) AS n FROM blobs").get()!.n,
    waiting: [],
  };
  next.waiting = app.db
    .query<{ id: number }, [number]>("SELECT id FROM blobs WHERE id <= ? AND (phash = '' OR pending_delete = 1) ORDER BY id")
    .all(next.after)
    .map((r) => r.id);

  const insert = app.db.query("INSERT OR IGNORE INTO dedup_candidates (blob_a, blob_b, distance, state, created_at) VALUES (?, ?, ?, 'pending', ?)");
  let found = 0;
  for (let start = 0; start < fresh.length; start += SLICE) {
    const pairs: [number, number, number][] = [];
    for (const f of fresh.slice(start, start + SLICE)) {
      for (const other of all) {
        // Two fresh blobs are compared once, from the lower id.
        if (other.id === f.id || (freshIds.has(other.id) && other.id < f.id)) continue;
        const distance = popcount32((f.hi ^ other.hi) >>> 0) + popcount32((f.lo ^ other.lo) >>> 0);
        if (distance <= maxDistance) pairs.push([Math.min(f.id, other.id), Math.max(f.id, other.id), distance]);
      }
    }
    if (pairs.length) {
      const now = sqlTime();
      app.db.transaction(() => {
        for (const [a, b, d] of pairs) found += insert.run(a, b, d, now).changes;
      })();
    }
    if (start + SLICE < fresh.length) await Bun.sleep(0);
  }
  app.db.query("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(WATERMARK_KEY, JSON.stringify(next));
  if (found) app.log.info("相似图片扫描完成", { compared: fresh.length, found });
  return { compared: fresh.length, found };
}

interface CandidateRow {
  id: number;
  blob_a: number;
  blob_b: number;
  distance: number;
  state: string;
}

/** The pair awaiting review: NotFound for an unknown id, Conflict once it was decided. */
function pendingCandidate(app: AppContext, id: number): CandidateRow {
  const c = app.db.query<CandidateRow, [number]>("SELECT id, blob_a, blob_b, distance, state FROM dedup_candidates WHERE id = ?").get(id);
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

    const moved = app.db
      .query<{ id: string }, [number]>("SELECT id FROM images WHERE blob_id = ?")
      .all(removedBlobId)
      .map((r) => r.id);
    app.db.query("UPDATE images SET blob_id = ? WHERE blob_id = ?").run(keepBlobId, removedBlobId);
    app.db.query("UPDATE blobs SET ref_count = ref_count + ? WHERE id = ?").run(moved.length, keepBlobId);
    scheduleBlobDelete(app, removedBlobId);
    app.db.query("UPDATE dedup_candidates SET state = 'merged' WHERE id = ?").run(candidateId);
    app.db
      .query("UPDATE dedup_candidates SET state = 'dismissed' WHERE state = 'pending' AND id != ?1 AND (blob_a = ?2 OR blob_b = ?2)")
      .run(candidateId, removedBlobId);
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
    app.db.query("UPDATE dedup_candidates SET state = 'dismissed' WHERE id = ?").run(candidateId);
    audit(app.db, actor, "dedup.dismiss", candidateId, { blob_a: c.blob_a, blob_b: c.blob_b });
  })();
}

