// Reading a Chevereto API v1 upload request: `key`, `format` and `source` (or V4's `image`) may
// come from the query, a multipart form or a urlencoded form; `source` is a file part, base64
// text or an image URL (fetched through the SSRF-safe import).
import { rm } from "node:fs/promises";
import type { AppContext } from "../context";
import { badRequest } from "../http/errors";
import { importFromUrl, uploadBodyLimits, uploadMaxBytes } from "../http/upload-input";
import { parseMultipart, tooLarge, type ReceivedFile } from "../images/upload/receive";
import { DATA_URL_PREFIX, decodeBase64 } from "./base64-stream";
import { CHEVERETO_CODE, CheveretoRefusal } from "./chevereto-errors";
import { CHEVERETO_TEXT_FIELDS, readUrlencodedForm, type SourceName } from "./chevereto-urlencoded";

export interface CheveretoInput {
  /** `key`, `format`, `expiration`, and `source` as text when the image is not a file. */
  fields: Record<string, string>;
  /** The `source` file part, or a long base64 `source` (or `image`) already decoded to a temp file. */
  file?: ReceivedFile;
  /** `image` was sent (V4's ImgBB-compatible form): the answer takes ImgBB's shape. */
  imgbb: boolean;
}

/**
 * `image` is V4's ImgBB-compatible name of `source` (read as `source ?? image`); `title`,
 * `description`, `nsfw`, `album_id`, `tags`… have no meaning here and are not read.
 */
const FIELDS = [...CHEVERETO_TEXT_FIELDS, "source", "image"];

/** What the form gave: its fields, a file, and which name the file came in. */
interface FormRead {
  fields: Record<string, string>;
  file?: ReceivedFile;
  from?: SourceName;
  imageSent?: boolean;
}

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
  const query: Record<string, string> = {};
  const params = new URL(request.url).searchParams;
  for (const name of FIELDS) {
    const value = params.get(name);
    if (value !== null) query[name] = value;
  }
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  const limits = uploadBodyLimits(app);
  let form: FormRead = { fields: {} };
  if (!request.body) {
    // No body: the query alone.
  } else if (type.startsWith("multipart/form-data")) {
    // A file part counts only as `source` (PHP's $_REQUEST, where `image` is read, holds no files).
    const read = await parseMultipart(request, app.paths.tmp, limits, FIELDS, { fileField: "source", largeFields: ["source", "image"], onField });
    form = { ...read, from: read.file ? "source" : undefined };
  } else if (type.startsWith("application/x-www-form-urlencoded")) {
    form = await readUrlencodedForm(request, app.paths.tmp, limits, onField);
  } else {
    throw badRequest("请求必须是 multipart/form-data 或 application/x-www-form-urlencoded");
  }
  return chooseSource(query, form);
}

/**
 * Chevereto's `$FILES['source'] ?? $REQUEST['source'] ?? $REQUEST['image']`, where $REQUEST is
 * the form over the query: the one image the upload takes, as `fields.source` text or `file`.
 * A decoded `image` file that loses to a `source` is removed.
 */
async function chooseSource(query: Record<string, string>, form: FormRead): Promise<CheveretoInput> {
  const fields = { ...query, ...form.fields };
  delete fields.source;
  delete fields.image;
  const imgbb = "image" in query || "image" in form.fields || form.imageSent === true;
  const text = form.fields.source ?? (form.from === "source" ? undefined : query.source);
  let file = form.file;
  if (file && form.from === "image" && text !== undefined) {
    await discardInput({ fields, file, imgbb });
    file = undefined;
  }
  if (file) return { fields, file, imgbb };
  const chosen = text ?? form.fields.image ?? query.image;
  if (chosen !== undefined) fields.source = chosen;
  return { fields, imgbb };
}

/** Drops a received file part that will not be used (e.g. the key turned out to be wrong). */
export async function discardInput(input: CheveretoInput | undefined) {
  if (input?.file?.path) await rm(input.file.path, { force: true });
}

/** `source` as an image file: the file part, an http(s) URL, or base64 (optionally a data: URL). */
export async function cheveretoSource(app: AppContext, input: CheveretoInput): Promise<ReceivedFile> {
  if (input.file) return input.file;
  const source = input.fields.source?.trim();
  // Chevereto's "Empty upload source" (code 130), also for an empty or blank value ("Empty source").
  if (!source) throw new CheveretoRefusal("缺少 source：需要图片文件、base64 数据或图片 URL", CHEVERETO_CODE.source);
  if (/^https?:\/\//i.test(source)) return importFromUrl(app, source);
  const maxBytes = uploadMaxBytes(app);
  const bytes = decodeBase64(source.replace(DATA_URL_PREFIX, ""));
  if (bytes.length > maxBytes) throw tooLarge(maxBytes);
  // No hash here: prepareImage hashes the bytes it stores, which under exif_policy=strip are not these.
  return { bytes, size: bytes.length, fileName: "image" };
}
