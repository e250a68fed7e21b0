/**
 * POST Object: browser-form uploads signed with a SigV4 POST policy (boto3 `generate_presigned_post`,
 * the SDK's `createPresignedPost`). The form is streamed: fields first, and the policy is verified when
 * the file part starts, before a byte of it is stored; then the file goes through the same upload
 * pipeline (gate, quota, image checks) as a PutObject. Fields after the file are ignored, as in S3.
 */
import busboy from "busboy";
import { busboyLimits } from "../../shared/busboy-limits";
import { withIdleDeadline } from "../../images/upload/body-deadline";
import { rm } from "node:fs/promises";
import { Readable } from "node:stream";
import { hasUploadScope, resolveS3Credential, TokenRepo } from "../../auth/tokens";
import type { AppContext } from "../../context";
import type { UploadGate } from "../../images/upload/limits";
import { writeDigested, type BodyDigests } from "../body";
import { entityTooLarge, S3Error } from "../errors";
import { MAX_POLICY_BYTES, verifyPostPolicy } from "../post-policy";
import { formFieldsAsHeaders, storedMeta } from "../object-meta";
import { objectUrl } from "../request";
import { refuseUnsupportedFeatures, requireMetadataSize } from "../write-headers";
import { publicOrigin, requestInfo } from "../../http/request-info";
import { BodyBudget } from "../../http/body-limit";
import { el, S3_NS, xmlResponse } from "../xml";
import { maxUploadBytes, requireValidKey, storeObject } from "./objects";
import { uploadIdleMs } from "../../http/idle-limits";

/** A form upload: no Authorization header or presigned query, a multipart/form-data body. */
export function isPostPolicyUpload(request: Request, query: string): boolean {
  return (
    request.method === "POST" &&
    !request.headers.has("authorization") &&
    !/(^|&)X-Amz-Algorithm=/.test(query) &&
    (request.headers.get("content-type") ?? "").toLowerCase().startsWith("multipart/form-data")
  );
}

/** The file part to `path`: hashed, capped at `maxBytes`, at least `minBytes`. */
async function fileToDisk(stream: Readable, path: string, maxBytes: number, minBytes: number, uploadCap: number): Promise<BodyDigests> {
  const digests = await writeDigested(path, stream as AsyncIterable<Buffer>, (size) => {
    if (size <= maxBytes) return;
    throw maxBytes < uploadCap ? new S3Error("EntityTooLarge", "文件超过策略 content-length-range 允许的大小") : entityTooLarge(uploadCap);
  });
  if (digests.size < minBytes) {
    await rm(path, { force: true });
    throw new S3Error("EntityTooSmall", "文件小于策略 content-length-range 要求的大小", 400);
  }
  return digests;
}

function successResponse(fields: Record<string, string>, bucket: string, key: string, etag: string, origin: string): Response {
  const headers = { etag: `"${etag}"`, location: objectUrl(origin, bucket, key) };
  const redirect = fields.success_action_redirect ?? fields.redirect;
  if (redirect && /^https?:\/\//i.test(redirect)) {
    const target = new URL(redirect);
    target.searchParams.set("bucket", bucket);
    target.searchParams.set("key", key);
    target.searchParams.set("etag", `"${etag}"`);
    return new Response(null, { status: 303, headers: { ...headers, location: target.toString() } });
  }
  const status = fields.success_action_status;
  if (status === "201") {
    return xmlResponse(
      el("PostResponse", [el("Location", headers.location), el("Bucket", bucket), el("Key", key), el("ETag", `"${etag}"`)], { xmlns: S3_NS }),
      201,
      headers,
    );
  }
  return new Response(null, { status: status === "200" ? 200 : 204, headers });
}

const malformedForm = () => new S3Error("MalformedPOSTRequest", "表单上传的 multipart 格式无效", 400);

const MAX_FIELDS = 64;
const MAX_PARTS = 80;
/** Every field at its longest and every part header at busboy's 16 KiB, with room for delimiters. */
const FORM_OVERHEAD = MAX_FIELDS * MAX_POLICY_BYTES + MAX_PARTS * 17 * 1024;

/**
 * The fields of forms not yet authenticated (their policy is checked when the file part arrives),
 * held in memory: bounded per client address and in all, as the small bodies are (http/body-limit.ts).
 * Unbounded, 600 forms that never sent their file held 1.25 MiB each, a byte a minute keeping each
 * alive (hostile-input audit). A real form's fields are a few KiB.
 */
const heldFields = new BodyBudget(32 * 1024 * 1024, 2 * 1024 * 1024);
const fieldsBusy = () => new S3Error("SlowDown", "该地址同时发送的表单上传过多，请稍后重试", 503, { "retry-after": "5", connection: "close" });

export async function postObject(app: AppContext, gate: UploadGate, request: Request, bucket: string): Promise<Response> {
  const client = requestInfo(request).client;
  let held = 0;
  try {
    return await receiveForm(app, gate, request, bucket, (bytes) => {
      if (heldFields.take(client, bytes) !== "ok") return false;
      held += bytes;
      return true;
    });
  } finally {
    heldFields.give(client, held);
  }
}

async function receiveForm(app: AppContext, gate: UploadGate, request: Request, bucket: string, holdField: (bytes: number) => boolean): Promise<Response> {
  if (!request.body) throw new S3Error("InvalidArgument", "缺少表单内容");
  // The largest form that can be accepted: the file at the upload cap, and the fields and part
  // headers the parser limits allow. Declared longer, it is refused unread; streamed, once that
  // much arrived (an endless preamble or skipped part would otherwise be read to Bun's limit).
  const uploadCap = maxUploadBytes(app);
  const bodyLimit = uploadCap + FORM_OVERHEAD;
  if (Number(request.headers.get("content-length") ?? NaN) > bodyLimit) throw entityTooLarge(uploadCap);
  // The same idle deadline as every upload surface: a silent client is RequestTimeout (toS3Error).
  const idleMs = uploadIdleMs(app.settings.get().upload_idle_timeout_seconds);
  const source = Readable.fromWeb(withIdleDeadline(request.body, idleMs, { bytes: bodyLimit, over: () => entityTooLarge(uploadCap) }) as never);
  const fields: Record<string, string> = {};
  let upload: Promise<Response> | undefined;
  /** The body's own failure (idle deadline, size cap), once it happened. */
  let bodyFailure: unknown;

  const handleFile = async (stream: Readable, fileName: string): Promise<Response> => {
    let principal: ReturnType<typeof resolveS3Credential>;
    const policy = verifyPostPolicy(fields, bucket, (id) => {
      principal = resolveS3Credential(app, id);
      return principal?.secret;
    });
    const { token, user } = principal!;
    if (!hasUploadScope(token)) throw new S3Error("AccessDenied", "该上传令牌没有上传权限");
    new TokenRepo(app.db).touch(token);
    const rawKey = fields.key;
    if (rawKey === undefined) throw new S3Error("InvalidArgument", "表单缺少 key 字段");
    const key = rawKey.replaceAll("${filename}", fileName);
    policy.check("key", key);
    if (fields["content-type"] !== undefined) policy.check("content-type", fields["content-type"]);
    requireValidKey(key);
    // The form's fields are its headers: the same refusals and the same stored metadata as PutObject.
    const asHeaders = formFieldsAsHeaders(fields);
    refuseUnsupportedFeatures(asHeaders);
    const meta = storedMeta(asHeaders);
    requireMetadataSize(meta);
    const cap = Math.min(uploadCap, policy.maxSize ?? Infinity);
    const { digests } = await storeObject(app, gate, { user, token }, key, meta, (path) => fileToDisk(stream, path, cap, policy.minSize, uploadCap));
    return successResponse(fields, bucket, key, digests.md5, publicOrigin(request, app.settings.get().base_url));
  };

  const parsed = new Promise<void>((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: { "content-type": request.headers.get("content-type") ?? "" },
        // Every file part is let through to the handler below, which takes the first named `file` and
        // skips the others (a browser sends an empty part for each unused file input).
        limits: busboyLimits({ fieldSize: MAX_POLICY_BYTES, fields: MAX_FIELDS, files: MAX_PARTS, parts: MAX_PARTS }),
        defParamCharset: "utf8",
      });
    } catch {
      reject(malformedForm());
      return;
    }
    const stop = (err: unknown) => {
      source.unpipe(parser);
      source.destroy();
      reject(err);
    };
    parser.on("field", (name, value, info) => {
      if (info.valueTruncated || info.nameTruncated) return stop(new S3Error("MalformedPOSTRequest", `表单字段 ${name} 过长`, 400));
      if (upload) return;
      if (!holdField(Buffer.byteLength(name) + Buffer.byteLength(value))) return stop(fieldsBusy());
      fields[name.toLowerCase()] = value;
    });
    parser.on("file", (name, stream, info) => {
      // A body ending inside a part errors that part's stream; unheard (a part nobody reads, or the
      // file of a form refused before its bytes are read), that error would end the process. The
      // parser reports the same fault itself.
      let broken: unknown;
      stream.on("error", (err) => {
        broken = err;
      });
      if (upload || name.toLowerCase() !== "file") {
        stream.resume();
        return;
      }
      // The file's bytes ended or broke mid-part: the parser's own error (English, internal) is
      // the client's malformed form, unless the body itself failed first (its deadline or cap).
      upload = handleFile(stream, info.filename ?? "").catch((err: unknown) => {
        throw err === broken ? (bodyFailure ?? malformedForm()) : err;
      });
      upload.catch(stop);
    });
    parser.on("partsLimit", () => stop(new S3Error("MalformedPOSTRequest", "表单字段过多", 400)));
    parser.on("fieldsLimit", () => stop(new S3Error("MalformedPOSTRequest", "表单字段过多", 400)));
    parser.on("error", () => stop(malformedForm()));
    parser.on("close", () => resolve());
    source.on("error", (err) => {
      bodyFailure = err;
      stop(err);
    });
    source.pipe(parser);
  });
  try {
    await parsed;
  } catch (err) {
    // The upload's own error explains more than the aborted stream's.
    if (upload) await upload;
    throw err;
  }
  if (!upload) throw new S3Error("InvalidArgument", "表单上传必须包含一个名为 file 的文件字段（放在最后）");
  return upload;
}
