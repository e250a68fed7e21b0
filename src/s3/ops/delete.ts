/**
 * DeleteObject and DeleteObjects, unconditional or conditional (`If-Match` / a per-object `<ETag>`,
 * AWS since 2025). A delete removes the user's reference to the image like an admin delete (CDN purge
 * included); other users' keys are invisible.
 */
import type { AppContext } from "../../context";
import { SLICE_MS, Slicer } from "../../db/sliced";
import { deleteReference } from "../../images/delete";
import { audit } from "../../ops/audit";
import { readXmlBody } from "../body";
import { S3Error, malformedXml } from "../errors";
import { deleteFolder, isFolderKey } from "../folders";
import { objectByKey } from "../object-repo";
import type { S3Request } from "../request";
import { deleteExpectation, keyStillMatches, type KeyExpectation } from "../write-conditions";
import { type DeleteCondition, el, parseDeleteObjects, xmlResponse, type Xml } from "../xml";

/**
 * The `If-Match` of a DeleteObject, undefined without one. Conditions Kura cannot evaluate are 501,
 * never ignored (ignoring one deletes unconditionally): `If-None-Match` (no S3 delete takes it) and
 * the directory-bucket-only `x-amz-if-match-last-modified-time` / `x-amz-if-match-size`.
 */
function deleteIfMatch(headers: Headers): string | undefined {
  if (headers.has("if-none-match")) throw new S3Error("NotImplemented", "删除请求不支持 If-None-Match，只支持 If-Match，未删除");
  for (const name of ["x-amz-if-match-last-modified-time", "x-amz-if-match-size"]) {
    if (headers.has(name)) throw new S3Error("NotImplemented", `删除请求不支持 ${name}（AWS 仅目录存储桶支持），只支持 If-Match，未删除`);
  }
  return headers.get("if-match") ?? undefined;
}

/** Deletes the user's object: 204, also when absent (as S3 does), unless an `If-Match` fails (412, or 404 on a free key). */
export async function deleteObject(app: AppContext, req: S3Request): Promise<Response> {
  const expected = await deleteExpectation(app, req.user.id, req.key, deleteIfMatch(req.request.headers));
  removeKey(app, req, req.key, expected);
  return new Response(null, { status: 204 });
}

/**
 * Deletes the reference like an admin delete (CDN purge included) and audits it as the token's user.
 * With `expected`, only while the key still holds the version its condition matched: checked in the
 * same synchronous run as the delete, so nothing can re-point the key in between.
 */
function removeKey(app: AppContext, req: Pick<S3Request, "user" | "token">, key: string, expected?: KeyExpectation) {
  if (expected) keyStillMatches(app, req.user.id, key, expected);
  if (isFolderKey(key)) {
    deleteFolder(app, req.user.id, key);
    return;
  }
  const object = objectByKey(app, req.user.id, key);
  if (!object) return;
  if (deleteReference(app, object.id)) audit(app.db, req.user, "image.delete", object.id, { via: "s3", key, token_id: req.token.id });
  app.lookups.forgetAlias(req.user.id, key);
}

/** POST ?delete: up to 1000 keys; each reported as Deleted (unless Quiet) or as an Error, in the order given. */
export async function deleteObjects(app: AppContext, req: S3Request): Promise<Response> {
  const parsed = parseDeleteObjects(await readXmlBody(req));
  if (!parsed) throw malformedXml();
  const results = await deleteKeys(app, req, parsed.keys, parsed.quiet, SLICE_MS, parsed.conditions);
  return xmlResponse(el("DeleteResult", results, { xmlns: "http://s3.amazonaws.com/doc/2006-03-01/" }));
}

/** The expectation of one object's condition: a failed ETag throws (an `<Error>` for that key), an unsupported one is 501 for it. */
async function conditionExpectation(app: AppContext, userId: string, key: string, condition: DeleteCondition | undefined) {
  if (condition?.unsupported) throw new S3Error("NotImplemented", `不支持按 ${condition.unsupported} 条件删除（AWS 仅目录存储桶支持），只支持 ETag，未删除`);
  return deleteExpectation(app, userId, key, condition?.etag);
}

/** S3's `<Error>` entry for a key: the code and message of a refusal (PreconditionFailed, NoSuchKey, NotImplemented…), else InternalError. */
function errorEntry(key: string, err: unknown): Xml {
  const refusal = err instanceof S3Error && err.code !== "InternalError";
  return el("Error", [el("Key", key), el("Code", refusal ? err.code : "InternalError"), el("Message", refusal ? err.message : "删除失败")]);
}

/**
 * The result elements of deleting `keys` (`conditions[i]` the condition of `keys[i]`, if any). A
 * delete costs ~0.3-0.8 ms at a million images (1,000 keys once held the loop 336-786 ms), so the
 * loop is yielded whenever the deletes since the last yield have run for `sliceMs`; each key is
 * looked up again after a yield (one deleted meanwhile is reported Deleted, as S3 does for a key
 * that is not there, unless it had a condition: then it is NoSuchKey, as AWS answers).
 */
export async function deleteKeys(
  app: AppContext,
  req: Pick<S3Request, "user" | "token">,
  keys: string[],
  quiet: boolean,
  sliceMs = SLICE_MS,
  conditions?: (DeleteCondition | undefined)[],
): Promise<(Xml | undefined)[]> {
  const results: (Xml | undefined)[] = [];
  const slicer = new Slicer(sliceMs);
  for (const [i, key] of keys.entries()) {
    await slicer.step();
    try {
      const expected = await conditionExpectation(app, req.user.id, key, conditions?.[i]);
      removeKey(app, req, key, expected);
      results.push(quiet ? undefined : el("Deleted", el("Key", key)));
    } catch (err) {
      results.push(errorEntry(key, err));
    }
  }
  return results;
}
