import { Invalid } from "../../errors";
import busboy from "busboy";
import { busboyLimits } from "../../shared/busboy-limits";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable, type Writable } from "node:stream";
import { fileWritable } from "../../shared/file-writable";
import { randomBytes } from "node:crypto";
import { isBodyLimitError, withIdleDeadline, type BodyLimits } from "./body-deadline";
import { type PlainPart, plainFormParts } from "./plain-form";

export type { BodyLimits } from "./body-deadline";

export const FIELD_LIMIT_BYTES = 1024;
/** Parts and text fields a form may have (an upload needs a file and a few options). */
const MAX_PARTS = 32;
const MAX_TEXT_FIELDS = 20;
/** Room for multipart boundaries and small fields on top of the file itself. */
const MULTIPART_OVERHEAD = 64 * 1024;

const malformedForm = () => new Invalid("multipart 请求格式无效");
const tooManyFields = () => new Invalid("表单字段过多");
/** Two files under the upload's field: one would be stored and the other dropped without a word. */
const secondFile = (field: string) => new Invalid(`一次只能上传一个文件：表单中的 ${field} 字段出现了多次`);

export const tooLarge = (maxBytes: number) => new Invalid(`图片超过大小上限（${Math.floor(maxBytes / 1048576)} MB）`, "too_large");

export function tempPath(tmpDir: string, label: string): string {
  return join(tmpDir, `${label}-${Date.now()}-${randomBytes(6).toString("hex")}`);
}

/** An upload's bytes: in memory for small bodies, else in a temp file. */
export type ReceivedFile = ({ path: string; bytes?: undefined } | { bytes: Buffer; path?: undefined }) & {
  size: number;
  fileName: string;
  /** sha256 of the received bytes when it was computed while receiving. */
  sha256?: string;
};

/**
 * Bodies up to this size, with a declared Content-Length, are read in memory (plain forms in place):
 * no temp file, no stream emulation. Memory stays bounded by this size times
 * max_concurrent_uploads; anything larger or chunked streams to disk.
 */
export const IN_MEMORY_UPLOAD_BYTES = 4 * 1024 * 1024;

/** Rejects by Content-Length before reading a byte when the declared body cannot fit. */
function checkDeclaredLength(request: Request, limit: number, maxBytes: number) {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(maxBytes);
}

/** Longest base64 text (plus room for a data: prefix and line breaks) an image within the cap can take. */
export const base64Limit = (maxBytes: number) => Math.ceil(maxBytes / 3) * 4 + 4096;

export interface MultipartOptions {
  /** Name of the file part (default `file`). */
  fileField?: string;
  /**
   * Text fields that may carry a whole image as base64 (Chevereto's `source` and `image`): each
   * may be as long as `base64Limit(maxBytes)` and is kept even if not in `allowedFields`. The
   * body as a whole still fits one such field, so a form cannot carry two long images.
   */
  largeFields?: readonly string[];
  /**
   * Sees each kept text field as soon as it has arrived, before the rest of the body is read;
   * throwing ends the read with that error (Chevereto checks a key inside the form this way).
   */
  onField?: (name: string, value: string) => void;
}

/**
 * Streams a multipart/form-data upload to a temp file: the part named `file` goes to
 * disk with a hard cap (413 as soon as it is crossed, nothing more is read), every
 * other field is text of at most 1 KiB. Only the fields in `allowedFields` are kept.
 */
export async function receiveMultipart(
  request: Request,
  tmpDir: string,
  limits: BodyLimits,
  allowedFields: readonly string[],
): Promise<{ file: ReceivedFile; fields: Record<string, string> }> {
  const { file, fields } = await parseMultipart(request, tmpDir, limits, allowedFields);
  if (!file) throw new Invalid("缺少文件字段 file");
  return { file, fields };
}

/**
 * receiveMultipart with a configurable file part that may be absent (the caller decides). Both
 * paths read the body through the idle deadline: no byte for `limits.idleMs` is a 408.
 */
export async function parseMultipart(
  request: Request,
  tmpDir: string,
  limits: BodyLimits,
  allowedFields: readonly string[],
  opts: MultipartOptions = {},
): Promise<{ file: ReceivedFile | undefined; fields: Record<string, string> }> {
  const { maxBytes, idleMs } = limits;
  const fileField = opts.fileField ?? "file";
  const type = request.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("multipart/form-data")) throw new Invalid(`请求必须是 multipart/form-data，文件字段名为 ${fileField}`);
  if (!request.body) throw new Invalid("缺少请求体");
  const largeFields = opts.largeFields ?? [];
  const textLimit = largeFields.length > 0 ? base64Limit(maxBytes) : FIELD_LIMIT_BYTES;
  // The largest form that can be accepted: declared longer, it is refused unread; streamed, it
  // is refused once that much has arrived, whatever the excess is (an endless preamble, a
  // skipped part), instead of being read to Bun's limit.
  const bodyLimit = Math.max(maxBytes, textLimit) + MULTIPART_OVERHEAD;
  checkDeclaredLength(request, bodyLimit, maxBytes);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  const oversized = (name: string, value: string) =>
    Buffer.byteLength(value) > (largeFields.includes(name) ? textLimit : FIELD_LIMIT_BYTES) ? fieldTooLong(name, maxBytes, largeFields) : undefined;
  const keeps = (name: string) => largeFields.includes(name) || allowedFields.includes(name);
  const onField = opts.onField ?? (() => {});
  const rules: FormRules = { maxBytes, textLimit, fileField, oversized, keeps, onField, largeFields };
  if (declared <= IN_MEMORY_UPLOAD_BYTES) {
    const body = await readDeclared(withIdleDeadline(request.body, idleMs), declared);
    // Read in place only where the walk finds the parts busboy finds (plain-form.ts); any
    // other form is read by busboy from memory, so both paths give it the same answer.
    const parts = plainFormParts(body, type);
    if (parts) return receivePlainForm(body, parts, rules);
    return streamMultipart(Readable.from([Buffer.from(body.buffer, body.byteOffset, body.byteLength)]), type, tmpDir, rules);
  }
  const capped = withIdleDeadline(request.body, idleMs, { bytes: bodyLimit, over: () => tooLarge(maxBytes) });
  return streamMultipart(Readable.fromWeb(capped as never), type, tmpDir, rules);
}

/** What a form is checked against, the same on both paths. */
interface FormRules {
  maxBytes: number;
  /** Limit of the large field (base64 source) when there is one, else of every text field. */
  textLimit: number;
  fileField: string;
  largeFields: readonly string[];
  /** The error for a text field over its limit (in UTF-8 bytes), or undefined. */
  oversized: (name: string, value: string) => Error | undefined;
  keeps: (name: string) => boolean;
  onField: (name: string, value: string) => void;
}

/** A form read by busboy, the file part streamed to a temp file with the cap. */
async function streamMultipart(
  source: Readable,
  type: string,
  tmpDir: string,
  rules: FormRules,
): Promise<{ file: ReceivedFile | undefined; fields: Record<string, string> }> {
  const { maxBytes, textLimit, fileField, oversized, keeps, onField } = rules;
  const path = tempPath(tmpDir, "upload");
  const fields: Record<string, string> = {};
  let file: ReceivedFile | undefined;
  // The temp file's stream, once the file part began: on any failure it is destroyed and
  // closed before the file is removed, so a rejected or aborted upload holds no descriptor
  // (and no disk space of an unlinked file) and cannot recreate the file after the removal.
  let out: Writable | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      let parser: busboy.Busboy;
      try {
        parser = busboy({
          headers: { "content-type": type },
          // `files` as high as `parts`: a file part before the one named `file` is skipped, not the
          // end of the form (busboy drops every file past the limit), as on the in-memory path.
          limits: busboyLimits({ fileSize: maxBytes, fieldSize: textLimit, files: MAX_PARTS, fields: MAX_TEXT_FIELDS, parts: MAX_PARTS }),
          defParamCharset: "utf8",
        });
      } catch {
        reject(malformedForm());
        return;
      }
      let pendingWrite: Promise<void> = Promise.resolve();
      let failed = false;
      const fail = (err: Error) => {
        if (failed) return;
        failed = true;
        source.unpipe(parser);
        source.destroy();
        out?.destroy();
        reject(err);
      };
      const malformed = () => fail(malformedForm());
      // busboy names a part with `name=""` undefined; the native parser calls it "".
      parser.on("file", (partName: string | undefined, stream, info) => {
        const name = partName ?? "";
        // A body that ends inside a file part errors that part's stream ("Unexpected end of
        // form"); unheard, that error would end the process.
        stream.on("error", malformed);
        if (name === fileField && file && !failed) {
          fail(secondFile(fileField));
          return;
        }
        if (name !== fileField || file || failed) {
          stream.resume();
          return;
        }
        let size = 0;
        // Hashed as it streams, so passthrough uploads never read the file back for it.
        const hasher = new Bun.CryptoHasher("sha256");
        // Not createWriteStream: its writes wait for renders on the libuv pool (shared/file-writable.ts).
        const target = fileWritable(path, 0o600);
        out = target;
        file = { path, size: 0, fileName: info.filename || "image" };
        stream.on("data", (chunk: Buffer) => {
          size += chunk.length;
          hasher.update(chunk);
        });
        stream.on("limit", () => fail(tooLarge(maxBytes)));
        pendingWrite = new Promise((done, broke) => {
          target.on("finish", () => {
            file!.size = size;
            file!.sha256 = hasher.digest("hex");
            done();
          });
          target.on("error", broke);
        });
        // Never left pending unheard when fail() destroyed the stream first.
        pendingWrite.catch(() => {});
        stream.pipe(target);
      });
      parser.on("field", (partName: string | undefined, value, info) => {
        const name = partName ?? "";
        if (info.valueTruncated || info.nameTruncated) return fail(fieldTooLong(name, maxBytes, rules.largeFields));
        const tooLong = oversized(name, value);
        if (tooLong) return fail(tooLong);
        if (!keeps(name)) return;
        fields[name] = value;
        try {
          onField(name, value);
        } catch (err) {
          fail(err as Error);
        }
      });
      parser.on("partsLimit", () => fail(tooManyFields()));
      parser.on("fieldsLimit", () => fail(tooManyFields()));
      parser.on("error", malformed);
      parser.on("close", () => pendingWrite.then(resolve, reject));
      source.on("error", (err) => fail(isBodyLimitError(err) ? err : new Invalid("上传中断")));
      source.pipe(parser);
    });
  } catch (err) {
    if (out) await closed(out);
    await rm(path, { force: true });
    throw err;
  }
  return { file, fields };
}

/** Resolves once `stream` has released its file descriptor (destroying it first if needed). */
function closed(stream: Writable): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("close", () => resolve());
    stream.destroy();
  });
}

function fieldTooLong(name: string, maxBytes: number, largeFields: readonly string[]) {
  return largeFields.includes(name) ? tooLarge(maxBytes) : new Invalid(`表单字段 ${name} 超过 1 KiB`);
}

/**
 * A body with a declared length of at most IN_MEMORY_UPLOAD_BYTES, read whole into memory. Read
 * here rather than by `request.formData()`, which no deadline can reach.
 */
async function readDeclared(body: ReadableStream<Uint8Array>, declared: number): Promise<Uint8Array<ArrayBuffer>> {
  const reader = body.getReader();
  try {
    const first = await reader.read();
    if (first.done) return new Uint8Array(0);
    // Most bodies arrive as one chunk (Bun has usually read the whole request by then): that
    // chunk is ours, so it is the body, without a 200 KB allocation, zero-fill and copy.
    if (first.value.length === declared) {
      if (!(await reader.read()).done) throw malformedForm();
      return first.value as Uint8Array<ArrayBuffer>;
    }
    // Filled before it is read: no zero-fill needed, and only the filled part is returned.
    const bytes = Buffer.allocUnsafe(declared);
    let size = 0;
    for (let chunk: Awaited<ReturnType<typeof reader.read>> = first; !chunk.done; chunk = await reader.read()) {
      if (size + chunk.value.length > declared) throw malformedForm();
      bytes.set(chunk.value, size);
      size += chunk.value.length;
    }
    return new Uint8Array(bytes.buffer, bytes.byteOffset, size);
  } catch (err) {
    await reader.cancel().catch(() => {});
    throw err instanceof Invalid ? err : new Invalid("上传中断");
  }
}

/** A plain form already in memory: the file is a view of the body, the text fields decoded as busboy decodes them. */
function receivePlainForm(
  body: Uint8Array<ArrayBuffer>,
  parts: PlainPart[],
  { maxBytes, fileField, oversized, keeps, onField }: FormRules,
): { file: ReceivedFile | undefined; fields: Record<string, string> } {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const fields: Record<string, string> = {};
  let upload: PlainPart | undefined;
  // The streaming path's limits, so a form gets the same answer whichever path reads it.
  let count = 0;
  let texts = 0;
  for (const part of parts) {
    if (++count > MAX_PARTS || (part.fileName === undefined && ++texts > MAX_TEXT_FIELDS)) throw tooManyFields();
    if (part.fileName !== undefined) {
      if (part.name === fileField && upload) throw secondFile(fileField);
      if (part.name === fileField) upload = part;
      continue;
    }
    const value = bytes.toString("utf8", part.start, part.end);
    const tooLong = oversized(part.name, value);
    if (tooLong) throw tooLong;
    if (!keeps(part.name)) continue;
    fields[part.name] = value;
    onField(part.name, value);
  }
  if (!upload) return { file: undefined, fields };
  const size = upload.end - upload.start;
  if (size > maxBytes) throw tooLarge(maxBytes);
  // No hash here: prepareImage hashes the bytes it stores, which under exif_policy=strip are not these.
  return { file: { bytes: bytes.subarray(upload.start, upload.end), size, fileName: baseName(upload.fileName!) || "image" }, fields };
}

/** The file name as busboy gives it: the last `/` segment, and none for `.` or `..`. */
function baseName(name: string): string {
  const last = name.slice(name.lastIndexOf("/") + 1);
  return last === "." || last === ".." ? "" : last;
}
