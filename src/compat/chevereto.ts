// Response shapes of Chevereto's API v1 (app/legacy/routes/api.php of chevereto/chevereto):
// success {"status_code": 200, "success": {...}, "image": {...}, "status_txt": "OK"},
// error {"status_code": n, "error": {"message", "code"}, "status_txt": "..."}.
import { STATUS_CODES } from "node:http";
import { resizedUrl, thumbnailWidth } from "../shared/links";
import { humanDate, localTime, type CompatImage } from "./common";

export type CheveretoFormat = "json" | "txt" | "redirect";

/** Chevereto's "medium" size is 500 px wide: the smallest allowed width from there up. */
const MEDIUM_MIN_WIDTH = 500;

/** Chevereto's status_txt is the HTTP reason phrase (a 408 read "Error" from a table that missed it). */
export const statusText = (status: number) => STATUS_CODES[status] ?? "Error";

/** `format`: json (default), txt or redirect; anything else falls back to json like Chevereto's switch. */
export function cheveretoFormat(value: string | null | undefined): CheveretoFormat {
  return value === "txt" || value === "redirect" ? value : "json";
}

function sizeFormatted(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The `image` object (Image::formatArray, safe): the stored original plus resized thumb and medium forms. */
export function cheveretoImage(img: CompatImage, md5: string, now = Date.now()) {
  const filename = `${img.id}.${img.extension}`;
  const mediumWidth = img.widths?.filter((w) => w >= MEDIUM_MIN_WIDTH).sort((a, b) => a - b)[0] ?? thumbnailWidth(img.widths);
  const thumbUrl = resizedUrl(img.url, thumbnailWidth(img.widths));
  const mediumUrl = resizedUrl(img.url, mediumWidth);
  const file = (name: string, url: string) => ({ filename, name, mime: img.mime, extension: img.extension, url });
  return {
    name: img.id,
    extension: img.extension,
    size: img.size,
    width: img.width,
    height: img.height,
    // Chevereto's `date` is server-local time, `date_gmt` UTC.
    date: localTime(img.createdAt),
    date_gmt: img.createdAt,
    // Chevereto's own column, GMT in the same format: when the image is deleted, or null.
    expiration_date_gmt: img.expireAt,
    title: img.fileName.replace(/\.[^.]*$/, ""),
    description: null,
    nsfw: 0,
    md5,
    original_filename: img.fileName,
    filename,
    id_encoded: img.id,
    mime: img.mime,
    size_formatted: sizeFormatted(img.size),
    url: img.url,
    // No viewer pages: every link is the image itself, so ShareX's "direct link" choice does not matter.
    url_viewer: img.url,
    url_short: img.url,
    image: { ...file(img.id, img.url), size: img.size },
    thumb: file(`${img.id}.th`, thumbUrl),
    medium: file(`${img.id}.md`, mediumUrl),
    display_url: mediumUrl,
    views: 0,
    how_long_ago: humanDate(img.createdAt, now),
  };
}

export function cheveretoSuccess(image: ReturnType<typeof cheveretoImage>) {
  return { status_code: 200, success: { message: "image uploaded", code: 200 }, image, status_txt: "OK" };
}

/**
 * The answer when the source came as `image` (V4's ImgBB-compatible form, app/legacy/routes/api.php):
 * `status` beside `status_code`, the image under `data` with `id` (its encoded id), and V4's
 * "file uploaded" (that form exists only in V4). json_document_output adds `status_txt`.
 */
export function cheveretoImgbbSuccess(image: ReturnType<typeof cheveretoImage>) {
  return {
    status_code: 200,
    status: 200,
    success: { message: "file uploaded", code: 200 },
    data: { ...image, id: image.id_encoded },
    status_txt: "OK",
  };
}

export function cheveretoError(status: number, message: string, code: number = status) {
  return { status_code: status, error: { message, code }, status_txt: statusText(status) };
}
