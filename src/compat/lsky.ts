// Response shapes of the Lsky Pro V2 API (app/Http/Controllers/Api/V1/* and app/Http/Result.php
// of lsky-org/lsky-pro): every answer is {"status": bool, "message": "…", "data": …}.
import { linkSet } from "../shared/links";
import { escapeMarkup } from "../shared/markup";
import type { CompatImage } from "./common";
import { humanDate, localTime } from "./common";

/** Lsky answers `data: {}` when there is nothing to carry (Result.php: `$data ?: new \stdClass`). */
export function lskyBody(status: boolean, message: string, data: unknown = {}) {
  return { status, message, data };
}

export function lskyResponse(httpStatus: number, status: boolean, message: string, data: unknown = {}, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(lskyBody(status, message, data)), {
    status: httpStatus,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });
}

/**
 * Lsky's `links.html` (Image::links): the tag HTML-escaped once more, `&lt;img src="…" alt="…"
 * title="…" /&gt;`, as its pages show it for copying. Lsky pastes the name in raw; here the
 * attribute values are escaped inside the tag before the tag is escaped, so a name with `"`, `<`
 * or `&` neither ends the attribute of the copied tag nor becomes markup where the text is shown.
 * For ordinary names this is byte for byte Lsky's string.
 */
export function lskyHtml(url: string, name: string): string {
  // A control character (a line break) would split the copied tag.
  const attr = escapeMarkup(name.replace(/[\u0000-\u001f\u007f]/g, " "));
  const tag = `<img src="${escapeMarkup(url)}" alt="${attr}" title="${attr}" />`;
  return tag.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * `links` of an image (Image::links): `html` and `bbcode` in Lsky's forms; the Markdown forms
 * and the thumbnail from the shared link builders, URL with the extension.
 */
export function lskyLinks(img: CompatImage) {
  const s = linkSet(img.url, img.fileName, img.widths);
  return {
    url: s.url,
    html: lskyHtml(s.url, img.fileName),
    bbcode: `[img]${s.url}[/img]`,
    markdown: s.markdown,
    markdown_with_link: s.markdown_with_link,
    thumbnail_url: s.thumbnail_url,
  };
}

/** The fields both the upload answer and a list item carry. `size` is in KiB, as Lsky stores it. */
function lskyCommon(img: CompatImage) {
  const name = `${img.id}.${img.extension}`;
  return {
    key: img.id,
    name,
    pathname: name,
    origin_name: img.fileName,
    size: img.size / 1024,
    mimetype: img.mime,
    extension: img.extension,
  };
}

/** `data` of POST /api/v1/upload (ImageController::upload). */
export function lskyUploaded(img: CompatImage, digests: { md5: string; sha1: string }) {
  return { ...lskyCommon(img), md5: digests.md5, sha1: digests.sha1, links: lskyLinks(img) };
}

/**
 * One item of GET /api/v1/images. `md5` and `sha1` are the digests stored with the blob that this
 * image's own upload computed ('' when not → null; repos/blob-md5.ts `ownDigests`): a listing never
 * reads image bytes, so an image whose upload did not compute them (console and /api/upload uploads
 * without an object key, `sha1` of S3 uploads and of images from before migration 0015) lists them as
 * null, where Lsky always has both; even when another account's upload of the same bytes stored them.
 */
export function lskyListItem(img: CompatImage, digests: { md5: string; sha1: string } | undefined, now = Date.now()) {
  return {
    ...lskyCommon(img),
    md5: digests?.md5 || null,
    sha1: digests?.sha1 || null,
    width: img.width,
    height: img.height,
    links: lskyLinks(img),
    human_date: humanDate(img.createdAt, now),
    // Server-local time, as Lsky formats created_at in its app timezone.
    date: localTime(img.createdAt),
    album: null,
  };
}
