// Reading a Chevereto API v1 upload request: `key`, `format` and `source` may come from the
// query, a multipart form or a urlencoded form; `source` is a file part, base64 text or an
// image URL (fetched through the SSRF-safe import).
import { rm } from "node:fs/promises";
import type { AppContext } from "../context";
import { badRequest } from "../http/errors";
import { importFromUrl, uploadBodyLimits, uploadMaxBytes } from "../http/upload-input";
import { parseMultipart, tooLarge, type ReceivedFile } from "../images/upload/receive";
import { DATA_URL_PREFIX, decodeBase64 } from "./base64-stream";
import { CHEVERETO_TEXT_FIELDS, readUrlencodedForm } from "./chevereto-urlencoded";

export interface CheveretoInput {
  fields: Record<string, string>;
  /** The `source` file part, or a long base64 `source` already decoded to a temp file. */
  file?: ReceivedFile;
}

/** `title`, `description`, `nsfw`, `album_id`, `tags`… have no meaning here and are not read. */
const FIELDS = [...CHEVERETO_TEXT_FIELDS, "source"];

/**
 * The request's parameters (form over query, as PHP's $_REQUEST) and the file, if any. `onField`
 * sees each form field as soon as it has arrived (the route checks a key there, before the rest
 * of the body); throwing from it ends the read, and nothing received is kept.
 */
export async function readCheveretoInput(
  app: AppContext,
  request: Request,
  onField: (name: string, value: string) => void = () => {},
): Promise<CheveretoInput> {
  const fields: Record<string, string> = {};
  const query = new URL(request.url).searchParams;
  for (const name of FIELDS) {
    const value = query.get(name);
    if (value !== null) fields[name] = value;
  }
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  const limits = uploadBodyLimits(app);
  if (!request.body) return { fields };
  let form: CheveretoInput;
  if (type.startsWith("multipart/form-data")) {
    form = await parseMultipart(request, app.paths.tmp, limits, FIELDS, { fileField: "source", largeField: "source", onField });
  } else if (type.startsWith("application/x-www-form-urlencoded")) {
    form = await readUrlencodedForm(request, app.paths.tmp, limits, onField);
  } else {
    throw badRequest("请求必须是 multipart/form-data 或 application/x-www-form-urlencoded");
  }
  // A source in the form, as text or as a file, replaces one in the query.
  if (form.file) delete fields.source;
  return { fields: { ...fields, ...form.fields }, file: form.file };
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
  const bytes = decodeBase64(source.replace(DATA_URL_PREFIX, ""));
  if (bytes.length > maxBytes) throw tooLarge(maxBytes);
  // No hash here: prepareImage hashes the bytes it stores, which under exif_policy=strip are not these.
  return { bytes, size: bytes.length, fileName: "image" };
}
