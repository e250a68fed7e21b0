/**
 * Conditional writes (S3 since 2024): PutObject, CompleteMultipartUpload and CopyObject's destination
 * with `If-None-Match: *` ("only if the key is free") or `If-Match: <etag>` ("only if the key still
 * holds this version"). Ignoring them would silently re-point a link the caller meant to keep.
 *
 * A condition is checked twice: before the body is read (a refused write costs no upload), and again
 * inside the commit that moves the key (`keyUnchanged`), where it only asks whether the key still holds
 * what the first check saw, since the ETag may need the bytes (an MD5 not stored yet) and the commit
 * cannot wait. A write that lost the key to another one in between is refused there, never applied.
 */
import type { AppContext } from "../context";
import { S3Error, noSuchKey } from "./errors";
import { objectByKey, objectEtag } from "./object-repo";
import type { S3Request } from "./request";

/** What the key must still hold when the write commits: no image, or the image the condition matched. */
export type KeyExpectation = { imageId: string | null };

const preconditionFailed = () => new S3Error("PreconditionFailed", "对象不满足 If-Match / If-None-Match 条件，未写入");
const deletePreconditionFailed = () => new S3Error("PreconditionFailed", "对象的 ETag 与 If-Match 不符（对象可能已被改写），未删除");

/** `"a", W/"b", c` → quoted tags (weak prefix dropped; a bare tag, as the Java SDK v1 sends it, quoted). */
export function etagList(header: string): string[] {
  return header.split(",").map((t) => {
    const tag = t.trim().replace(/^W\//, "");
    return tag === "*" || tag.startsWith('"') ? tag : `"${tag}"`;
  });
}

/**
 * Evaluates the write's conditions against what `key` holds now; undefined when it sends none. As S3:
 * `If-None-Match` takes only `*` (anything else is 501), `If-Match` on a free key is 404 NoSuchKey, a
 * failed condition 412 PreconditionFailed.
 */
export async function writeExpectation(app: AppContext, req: S3Request, key: string): Promise<KeyExpectation | undefined> {
  const ifMatch = req.request.headers.get("if-match");
  const ifNoneMatch = req.request.headers.get("if-none-match");
  if (ifMatch === null && ifNoneMatch === null) return undefined;
  if (ifNoneMatch !== null && ifNoneMatch.trim() !== "*") throw new S3Error("NotImplemented", "写入请求的 If-None-Match 只支持 *（键不存在时才写入）");
  const current = objectByKey(app, req.user.id, key);
  if (ifMatch !== null) {
    if (!current) throw noSuchKey();
    const tags = etagList(ifMatch);
    if (!tags.includes("*") && !tags.includes(await objectEtag(app, current))) throw preconditionFailed();
  }
  if (ifNoneMatch !== null && current) throw preconditionFailed();
  return { imageId: current?.id ?? null };
}

/** Inside the commit that gives `key` to a new image: the key still holds what the condition saw, else 412 (nothing is written). */
export function keyUnchanged(app: AppContext, userId: string, key: string, expected: KeyExpectation) {
  if (!holdsExpected(app, userId, key, expected)) throw preconditionFailed();
}

function holdsExpected(app: AppContext, userId: string, key: string, expected: KeyExpectation): boolean {
  return (objectByKey(app, userId, key)?.id ?? null) === expected.imageId;
}

/**
 * A conditional delete (DeleteObject's `If-Match`, a DeleteObjects `<ETag>`; AWS since 2025): only
 * while the key still holds that version, so a client deleting what it last saw never deletes a newer
 * upload by someone else. As AWS: another ETag is 412 PreconditionFailed, a free key 404 NoSuchKey
 * (`*` too: "any version" of nothing). undefined without a condition: S3's unconditional delete.
 */
export async function deleteExpectation(app: AppContext, userId: string, key: string, ifMatch: string | undefined): Promise<KeyExpectation | undefined> {
  if (ifMatch === undefined) return undefined;
  const current = objectByKey(app, userId, key);
  if (!current) throw noSuchKey();
  const tags = etagList(ifMatch);
  if (!tags.includes("*") && !tags.includes(await objectEtag(app, current))) throw deletePreconditionFailed();
  return { imageId: current.id };
}

/** Right before the delete (in the same turn of the loop): the key still holds what the condition matched, else 412 (the ETag may have needed an await). */
export function keyStillMatches(app: AppContext, userId: string, key: string, expected: KeyExpectation) {
  if (!holdsExpected(app, userId, key, expected)) throw deletePreconditionFailed();
}
