/**
 * Multipart uploads: parts are stored as files under <tmp>/multipart/<uploadId>/ (named `<n>.<md5>`),
 * each received beside that dir and moved in only once complete; Complete concatenates the listed
 * parts in order into one temp file and stores it like a PutObject. `tmp` is wiped at startup (and
 * the rows with it), so an upload open across a restart is NoSuchUpload. Limits (multipart-store.ts):
 * open uploads per user, staged bytes against the quota, every part through the upload gate, expiry
 * of abandoned uploads.
 *
 * An upload is named by its key and id together: an id sent with another key is NoSuchUpload. The
 * steps that change an upload's parts (a part taking its place, Complete, Abort, expiry) run one at a
 * time per upload (`withUploadLock`), each looking the upload up again inside, so a request that lost
 * a race to Complete or Abort answers NoSuchUpload, never half-works. Two uploads of one part number:
 * the one whose body arrived last replaces the other, as in S3, and only its ETag completes.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdir, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { AppContext } from "../../context";
import type { UploadGate } from "../../images/upload/limits";
import { assertChecksums, headerChecksums, readXmlBody, receiveToFile, writeDigested, type BodyDigests, type HeaderChecksum } from "../body";
import { S3Error, entityTooLarge, malformedXml, noSuchUpload } from "../errors";
import {
  addStagedBytes,
  admitNewUpload,
  findUploadRow,
  insertUpload,
  partialPath,
  partsDir,
  quotaExceeded,
  quotaRoom,
  removeUpload,
  storedParts,
  trackReceiving,
  type UploadRow,
  withUploadLock,
} from "../multipart-store";
import { publicOrigin } from "../../http/request-info";
import { MULTIPART_ETAG } from "../object-meta";
import { objectUrl, partNumberOf, type S3Request } from "../request";
import { writeExpectation } from "../write-conditions";
import { pauseAt } from "../../testing/hold-points";
import { fsyncPath, renameDurablyAsync } from "../../shared/durable-file";
import { type CompletedPart, el, parseCompleteMultipart, S3_NS, xmlResponse } from "../xml";
import { refuseUnsupportedFeatures } from "../write-headers";
import { maxUploadBytes, requireValidKey, storeObject, writeMeta } from "./objects";

/**
 * The caller's open upload. S3 names an upload by key and id together, so an id sent with another key
 * is NoSuchUpload like an unknown id: otherwise Complete would store under the upload's own key and
 * silently replace an object the client never named, and Abort would cancel someone else's upload.
 */
export function findUpload(app: AppContext, req: S3Request): UploadRow {
  const row = findUploadRow(app, req.user.id, req.query.get("uploadId") ?? "");
  if (!row || row.object_key !== req.key) throw noSuchUpload();
  return row;
}

export function createMultipartUpload(app: AppContext, req: S3Request): Response {
  requireValidKey(req.key);
  // Refused here, not at Complete: the client would otherwise upload every part for nothing.
  const meta = writeMeta(req);
  admitNewUpload(app, req.user.id);
  const uploadId = randomBytes(16).toString("hex");
  insertUpload(app, { upload_id: uploadId, user_id: req.user.id, token_id: req.token.id, object_key: req.key, meta: JSON.stringify(meta) });
  return xmlResponse(el("InitiateMultipartUploadResult", [el("Bucket", req.bucket), el("Key", req.key), el("UploadId", uploadId)], { xmlns: S3_NS }));
}

export async function uploadPart(app: AppContext, gate: UploadGate, req: S3Request): Promise<Response> {
  // A part sent with a customer key (SSE-C) would be stored in clear like the rest.
  refuseUnsupportedFeatures(req.request.headers);
  const upload = findUpload(app, req);
  const raw = req.query.get("partNumber") ?? "";
  const n = partNumberOf(raw);
  // A part is an upload like any other: same concurrency limit and per-user rate.
  const release = gate.admit(req.user.id);
  try {
    return await receivePart(app, req, upload, n);
  } finally {
    release();
  }
}

async function receivePart(app: AppContext, req: S3Request, upload: UploadRow, n: number): Promise<Response> {
  const dir = partsDir(app, upload.upload_id);
  // All parts together become one image, so they share the max_upload_mb budget (bounds disk use too).
  let others = 0;
  for (const [number, part] of await storedParts(dir)) if (number !== n) others += (await stat(part.path).catch(() => ({ size: 0 }))).size;
  const maxBytes = maxUploadBytes(app);
  if (others >= maxBytes) throw entityTooLarge(maxBytes);
  // Staged bytes count against the quota while they are received, not only at Complete.
  const userId = req.user.id;
  const used = app.images.usedBytes(userId);
  const room = quotaRoom(app, userId, used);
  if (room <= 0) throw quotaExceeded();
  const cap = Math.min(maxBytes - others, room);
  const partial = partialPath(app, upload.upload_id, n);
  await mkdir(dirname(partial), { recursive: true });
  await pauseAt("s3.multipart", `op=part-receive upload=${upload.upload_id} part=${n}`);
  let received = 0;
  try {
    const digests = await receiveToFile(req, partial, cap, (bytes) => {
      received += bytes;
      trackReceiving(userId, bytes);
      if (Number.isFinite(room) && quotaRoom(app, userId, used) < 0) throw quotaExceeded();
    }).catch((err: unknown) => {
      if (err instanceof S3Error && err.code === "EntityTooLarge") throw cap < maxBytes - others ? quotaExceeded() : entityTooLarge(maxBytes);
      throw err;
    });
    // The body is in; the lock orders the parts by when their bodies arrived, so the last one wins.
    return await withUploadLock(upload.upload_id, `part-${n}`, () => commitPart(app, req, partial, n, digests.md5, digests.size));
  } finally {
    // Counted as receiving until staged (or dropped), so a wait for the lock opens no gap in the quota.
    trackReceiving(userId, -received);
    await rm(partial, { force: true }); // already moved when the part was kept
  }
}

/** Under the upload's lock: the received part takes the place of any earlier part `n`, counted once in the staged bytes. */
async function commitPart(app: AppContext, req: S3Request, partial: string, n: number, md5: string, size: number): Promise<Response> {
  // Aborted, completed or expired while the body arrived: the part is dropped, not staged.
  const upload = findUpload(app, req);
  const dir = partsDir(app, upload.upload_id);
  // The upload's folder made durable with its first part (the part's own sync covers only its name).
  if (await mkdir(dir, { recursive: true })) await fsyncPath(dirname(dir));
  const previous = (await storedParts(dir)).get(n);
  await pauseAt("s3.multipart", `op=part-commit upload=${upload.upload_id} part=${n}`);
  let replaced = 0;
  if (previous) {
    replaced = (await stat(previous.path).catch(() => ({ size: 0 }))).size;
    await rm(previous.path, { force: true });
  }
  // Synced before it is acknowledged: kept across a restart, a part must be whole after a crash too
  // (an empty file under its MD5 name would make Complete assemble a wrong object). The sync of the
  // folder after the rename makes the removal above durable too (same folder); a crash between the
  // two leaves the part missing, never two of it, and the client, unanswered, sends it again.
  await renameDurablyAsync(partial, join(dir, `${n}.${md5}`));
  addStagedBytes(app, upload.upload_id, size - replaced);
  return new Response(null, { status: 200, headers: { etag: `"${md5}"` } });
}

/**
 * Writes the parts, in order, into one file: streamed, hashed, capped. A full-object checksum sent
 * with Complete (`x-amz-checksum-*`, what the SDKs send for `ChecksumType: FULL_OBJECT`) is verified
 * against the assembled bytes: BadDigest, and nothing is stored. A composite one (`<base64>-<parts>`,
 * a checksum of the parts' checksums) cannot be, since parts keep no checksums of their own here.
 */
function concatenate(files: string[], path: string, maxBytes: number, checks: HeaderChecksum[]): Promise<BodyDigests> {
  return writeDigested(path, chained(files, checks), (size) => {
    if (size > maxBytes) throw entityTooLarge(maxBytes);
  });
}

/** The parts' bytes in order, fed to `checks`; a checksum that does not match fails the read after the last byte (writeDigested then removes the file). */
async function* chained(files: string[], checks: HeaderChecksum[]): AsyncIterable<Uint8Array> {
  for (const file of files) {
    for await (const chunk of Bun.file(file).stream()) {
      for (const c of checks) c.calc.update(chunk);
      yield chunk;
    }
  }
  assertChecksums(checks, "合并后对象");
}

const isFullObjectChecksum = (c: HeaderChecksum) => !/-\d+$/.test(c.value);

export async function completeMultipartUpload(app: AppContext, gate: UploadGate, req: S3Request): Promise<Response> {
  const { upload_id } = findUpload(app, req);
  const listed = parseCompleteMultipart(await readXmlBody(req, { checksumsDescribeObject: true }));
  if (!listed) throw malformedXml();
  for (let i = 1; i < listed.length; i++) {
    if (listed[i]!.partNumber <= listed[i - 1]!.partNumber) throw new S3Error("InvalidPartOrder", "分片列表必须按分片号升序排列");
  }
  // From the check of the parts to their removal, no Abort, part or second Complete may change them.
  return withUploadLock(upload_id, "complete", () => completeLocked(app, gate, req, listed));
}

async function completeLocked(app: AppContext, gate: UploadGate, req: S3Request, listed: CompletedPart[]): Promise<Response> {
  const upload = findUpload(app, req);
  const dir = partsDir(app, upload.upload_id);
  const stored = await storedParts(dir);
  const files: string[] = [];
  let total = 0;
  for (const part of listed) {
    const found = stored.get(part.partNumber);
    if (!found || found.md5 !== part.etag.toLowerCase()) throw new S3Error("InvalidPart", `分片 ${part.partNumber} 不存在或 ETag 不匹配`);
    files.push(found.path);
    total += (await stat(found.path)).size;
  }
  const maxBytes = maxUploadBytes(app);
  if (total > maxBytes) throw entityTooLarge(maxBytes);
  let meta: Record<string, string> = {};
  try {
    meta = JSON.parse(upload.meta) as Record<string, string>;
  } catch {
    // a damaged meta column only loses the x-amz-meta-* headers
  }
  const expected = await writeExpectation(app, req, upload.object_key);
  await pauseAt("s3.multipart", `op=complete upload=${upload.upload_id}`);
  const checks = headerChecksums(req).filter(isFullObjectChecksum);
  const etag = multipartEtag(listed.map((p) => stored.get(p.partNumber)!.md5));
  const store = (path: string) => concatenate(files, path, maxBytes, checks);
  // The upload's staged bytes become the object's: not counted twice by the quota check of its commit.
  await storeObject(app, gate, req, upload.object_key, { ...meta, [MULTIPART_ETAG]: etag }, store, expected, upload.upload_id);
  await removeUpload(app, upload.upload_id);
  return xmlResponse(
    el(
      "CompleteMultipartUploadResult",
      [
        el("Location", objectUrl(publicOrigin(req.request, app.settings.get().base_url), req.bucket, upload.object_key)),
        el("Bucket", req.bucket),
        el("Key", upload.object_key),
        el("ETag", `"${etag}"`),
      ],
      { xmlns: S3_NS },
    ),
  );
}

/** S3's multipart ETag: the MD5 of the parts' binary MD5s in order, then "-<part count>". */
function multipartEtag(partMd5s: string[]): string {
  const digest = createHash("md5")
    .update(Buffer.concat(partMd5s.map((md5) => Buffer.from(md5, "hex"))))
    .digest("hex");
  return `${digest}-${partMd5s.length}`;
}

export async function abortMultipartUpload(app: AppContext, req: S3Request): Promise<Response> {
  const { upload_id } = findUpload(app, req);
  return withUploadLock(upload_id, "abort", async () => {
    findUpload(app, req); // a Complete or Abort ahead of this one already removed it
    await pauseAt("s3.multipart", `op=abort upload=${upload_id}`);
    await removeUpload(app, upload_id);
    return new Response(null, { status: 204 });
  });
}
