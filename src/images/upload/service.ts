import { withoutControls } from "../../net/safe-fetch";
import { Invalid, isClientRejection } from "../../errors";
import { rm } from "node:fs/promises";
import type { AppContext } from "../../context";
import { parseSqlTime, sqlTime } from "../../db/time";
import { truncateText } from "../../shared/text";
import { findIdempotencyKey } from "../repos/idempotency";
import { recordUploadDigests } from "../repos/blob-md5";
import { storeReference } from "../store";
import { prepareImage, type ExifPolicy, type PreparedImage } from "./prepare";
import type { ReceivedFile } from "./receive";

export const MAX_TTL_SECONDS = 3_153_600_000;
/** Longest stored file name, in UTF-16 code units (what the JSON `file_name` field's own limit counts). */
const MAX_FILE_NAME = 255;

/** Per-upload choices; for multipart uploads they arrive with the body. */
export interface UploadOptions {
  exifPolicy?: string;
  /** Raw `ttl` input: seconds, numeric string, or "never". */
  ttl?: unknown;
  objectKey?: string | null;
  /** Runs inside the commit, before `objectKey` moves to the new image: throws to refuse it (S3's conditional writes). */
  beforeKeyMoves?: () => void;
  /** Held bytes this upload's own quota check leaves out: the S3 multipart upload it completes (store.ts checkQuota). */
  quotaLeavesOut?: string;
}

export interface UploadRequest {
  userId: string;
  tokenId: number | null;
  idempotencyKey?: string | null;
  /** Also compute MD5 and SHA-1 of the stored bytes (the Lsky Pro answer carries them). */
  digests?: boolean;
  /** The caller stores the MD5 itself (S3 hashes the body while receiving it): no second pass for an object key. */
  md5Known?: boolean;
  /** Receives the body into a temp file (multipart, URL import, raw) together with its options. */
  receive: () => Promise<{ file: ReceivedFile; options: UploadOptions }>;
}

/** `ttl` form/JSON value → seconds (0 = permanent), or undefined when absent. */
export function parseTtl(value: unknown): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (value === "never") return 0;
  const n = typeof value === "number" ? value : typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value.trim()) : NaN;
  if (!Number.isInteger(n) || n < 0 || n > MAX_TTL_SECONDS) throw new Invalid("ttl 必须是 0 到 3153600000 之间的整数秒，或 never");
  return n;
}

function parseExifPolicy(value: string | undefined, fallback: ExifPolicy): ExifPolicy {
  if (value === undefined || value === "") return fallback;
  if (value !== "strip" && value !== "passthrough") throw new Invalid("exif_policy 只能是 strip 或 passthrough");
  return value;
}

/** Fallback order: the request, the user's default, the global default (hours; 0 = permanent). */
function effectiveTtlSeconds(app: AppContext, userId: string, requested: number | undefined): number {
  if (requested !== undefined) return requested;
  const userDefault = app.users.byId(userId)?.default_ttl_hours;
  const hours = userDefault ?? app.settings.get().default_ttl_hours;
  return hours * 3600;
}

/** An earlier upload by the same user with the same Idempotency-Key, within retention. */
function replayed(app: AppContext, userId: string, key: string): string | undefined {
  const row = findIdempotencyKey(app.db, userId, key);
  if (!row) return undefined;
  const retentionMs = app.settings.get().idempotency_key_ttl_hours * 3_600_000;
  if (parseSqlTime(row.created_at).getTime() + retentionMs < Date.now()) return undefined;
  // An image that has expired since answers 404: its id is no answer to a retry, which uploads anew.
  const image = app.images.view(row.image_id);
  return image && (image.expire_at === null || image.expire_at > sqlTime()) ? row.image_id : undefined;
}

export interface UploadOutcome {
  id: string;
  replayed: boolean;
  /** With `digests`, for a new upload (a replay returns the earlier image without its bytes). */
  md5?: string;
  sha1?: string;
}

/** MD5 and SHA-1 of prepared bytes, in one pass over memory or the temp file. */
async function legacyDigests(prepared: PreparedImage): Promise<{ md5: string; sha1: string }> {
  const md5 = new Bun.CryptoHasher("md5");
  const sha1 = new Bun.CryptoHasher("sha1");
  if (prepared.bytes) {
    md5.update(prepared.bytes);
    sha1.update(prepared.bytes);
  } else {
    for await (const chunk of Bun.file(prepared.path!).stream()) {
      md5.update(chunk);
      sha1.update(chunk);
    }
  }
  return { md5: md5.digest("hex"), sha1: sha1.digest("hex") };
}

type UploadGate = { admit(userId: string): () => void };

/**
 * Uploads in flight per (user, Idempotency-Key). Reserving a key is a synchronous
 * check-and-set on the one event loop, so it is atomic: a concurrent retry finds the
 * reservation, waits for that upload and then answers with its result.
 */
const inFlight = new Map<string, Promise<UploadOutcome>>();

/** The one upload pipeline behind every upload endpoint. */
export function runUpload(app: AppContext, gate: UploadGate, req: UploadRequest): Promise<UploadOutcome> {
  const key = req.idempotencyKey?.trim();
  if (!key || key.length > 255) return uploadOnce(app, gate, req);
  return reserved(`${req.userId}\0${key}`, () => uploadOnce(app, gate, req));
}

async function reserved(slot: string, run: () => Promise<UploadOutcome>): Promise<UploadOutcome> {
  // Whoever finished first recorded the key; run() then replays it. A failed first attempt
  // records nothing, and the next waiter uploads itself.
  for (let running = inFlight.get(slot); running; running = inFlight.get(slot)) await running.catch(() => undefined);
  const mine = run();
  inFlight.set(slot, mine);
  try {
    return await mine;
  } finally {
    if (inFlight.get(slot) === mine) inFlight.delete(slot);
  }
}

async function uploadOnce(app: AppContext, gate: UploadGate, req: UploadRequest): Promise<UploadOutcome> {
  const started = performance.now();
  const startedAt = sqlTime();
  let outcome: "ok" | "rejected" | "failed" = "failed";
  let received: ReceivedFile | undefined;
  let preparedPath: string | undefined;
  let release: (() => void) | undefined;
  try {
    const key = req.idempotencyKey?.trim();
    if (key && key.length > 255) throw new Invalid("Idempotency-Key 过长");
    if (key) {
      const previous = replayed(app, req.userId, key);
      if (previous) {
        outcome = "ok";
        return { id: previous, replayed: true };
      }
    }
    const settings = app.settings.get();
    release = gate.admit(req.userId);
    const { file, options } = await req.receive();
    received = file;
    const exifPolicy = parseExifPolicy(options.exifPolicy, settings.exif_policy);
    const ttl = effectiveTtlSeconds(app, req.userId, parseTtl(options.ttl));
    const prepared = await prepareImage(received, {
      exifPolicy,
      maxPixels: settings.max_pixels_mp * 1_000_000,
      tmpDir: app.paths.tmp,
    });
    preparedPath = prepared.path;
    const id = await storeReference(app, prepared, {
      userId: req.userId,
      tokenId: req.tokenId,
      fileName: truncateText(withoutControls(received.fileName ?? "").trim() || "image", MAX_FILE_NAME),
      objectKey: options.objectKey || null,
      beforeKeyMoves: options.beforeKeyMoves,
      quotaLeavesOut: options.quotaLeavesOut,
      startedAt,
      ttlSeconds: ttl || null,
      idempotencyKey: key || undefined,
    });
    // A keyed image is an S3 object: its MD5 is its ETag, which listings must not compute from the bytes.
    const digests = req.digests || (options.objectKey && !req.md5Known) ? await legacyDigests(prepared) : undefined;
    const blobId = digests && app.images.view(id)?.blob_id;
    // Kept with the blob: listings (S3's ETags, the Lsky list's md5 and sha1) read them, never the bytes.
    // The image is marked as knowing them: the Lsky list shows a blob's digests only to an image whose
    // own upload computed them (audit LOW-2).
    if (digests && blobId) recordUploadDigests(app.db, id, blobId, digests);
    outcome = "ok";
    return { id, replayed: false, ...(req.digests ? digests : {}) };
  } catch (err) {
    // Invalid input is the client's fault whichever surface reported it: S3 body errors
    // (BadDigest, EntityTooLarge, IncompleteBody) are 4xx S3Errors, not domain errors.
    outcome = isClientRejection(err) ? "rejected" : "failed";
    throw err;
  } finally {
    release?.();
    if (received?.path) await rm(received.path, { force: true });
    if (preparedPath) await rm(preparedPath, { force: true });
    app.metrics.uploadDuration.observe({ outcome }, (performance.now() - started) / 1000);
  }
}
