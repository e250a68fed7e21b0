// Reading a Chevereto API v1 upload request: `key`, `format` and `source` may come from the
// query, a multipart form or a urlencoded form; `source` is a file part, base64 text or an
// image URL (fetched through the SSRF-safe import).
import { rm } from "node:fs/promises";
import type { AppContext } from "../context";
import { badRequest } from "../http/errors";
import { importFromUrl, uploadMaxBytes } from "../http/upload-input";
import { base64Limit, parseMultipart, tooLarge, type ReceivedFile } from "../images/upload/receive";

export interface CheveretoInput {
  fields: Record<string, string>;
  /** The `source` file part, when it came as a file. */
  file?: ReceivedFile;
}

const FIELDS = ["key", "format", "source"] as const;

/** Reads a urlencoded body up to `limit` bytes (a base64 image expands when percent-encoded). */
async function readBounded(request: Request, limit: number, maxBytes: number): Promise<string> {
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > limit) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body!) {
    size += chunk.length;
    if (size > limit) throw tooLarge(maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The request's parameters (form over query, as PHP's $_REQUEST) and the file part, if any. */
export async function readCheveretoInput(app: AppContext, request: Request): Promise<CheveretoInput> {
  const fields: Record<string, string> = {};
  const query = new URL(request.url).searchParams;
  for (const name of FIELDS) {
    const value = query.get(name);
    if (value !== null) fields[name] = value;
  }
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  const maxBytes = uploadMaxBytes(app);
  if (!request.body) return { fields };
  if (type.startsWith("multipart/form-data")) {
    const form = await parseMultipart(request, app.paths.tmp, maxBytes, FIELDS, { fileField: "source", largeField: "source" });
    return { fields: { ...fields, ...form.fields }, file: form.file };
  }
  if (type.startsWith("application/x-www-form-urlencoded")) {
    const text = await readBounded(request, 2 * base64Limit(maxBytes), maxBytes);
    for (const [name, value] of new URLSearchParams(text)) if ((FIELDS as readonly string[]).includes(name)) fields[name] = value;
    return { fields };
  }
  throw badRequest("请求必须是 multipart/form-data 或 application/x-www-form-urlencoded");
}

/** Drops a received file part that will not be used (e.g. the key turned out to be wrong). */
export async function discardInput(input: CheveretoInput | undefined) {
  if (input?.file?.path) await rm(input.file.path, { force: true });
}

/** `source` as an image file: the file part, an http(s) URL, or base64 (optionally a data: URL). */
export async function cheveretoSource(app: AppContext, input: CheveretoInput): Promise<ReceivedFile> {
  if (input.file) return input.file;
  const source = input.fields.source?.trim();
  if (!source) throw badRequest("缺少 source：需要图片文件、base64 数据或图片 URL");
  if (/^https?:\/\//i.test(source)) return importFromUrl(app, source);
  const maxBytes = uploadMaxBytes(app);
  const text = source.replace(/^data:[^,]*;base64,/i, "").replace(/\s+/g, "");
  if (!text || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw badRequest("source 不是有效的 base64 数据或图片 URL");
  const bytes = Buffer.from(text, "base64");
  if (bytes.length > maxBytes) throw tooLarge(maxBytes);
  // No hash here: prepareImage hashes the bytes it stores, which under exif_policy=strip are not these.
  return { bytes, size: bytes.length, fileName: "image" };
}
