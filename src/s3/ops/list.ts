/**
 * ListObjects (v1: marker/NextMarker, what rclone's provider Other uses) and ListObjectsV2
 * (continuation tokens, what the SDK uses) over the user's keyed images, in byte order, with
 * delimiter grouping into CommonPrefixes.
 */
import type { AppContext } from "../../context";
import { SLICE_MS, Slicer } from "../../db/sliced";
import { parseSqlTime } from "../../db/time";
import { S3Error } from "../errors";
import { listingEtag } from "../md5-backfill";
import { objectsFrom, type S3Object } from "../object-repo";
import { encodesNames, nameEncoder, pageSizeOf, type S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";

const PAGE = 256;

/**
 * S3's key order: the bytes of the UTF-8 encodings, which is also SQLite's BINARY collation of the
 * key columns. JavaScript's `<` compares UTF-16 units and would put U+E000–U+FFFF after astral characters.
 */
function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * The smallest string after every string that starts with `prefix`; undefined when there is none
 * (the prefix is only U+10FFFF). No sentinel character can do this, since a key may contain any
 * character, U+10FFFF included. UTF-8 byte order is code point order, so trailing U+10FFFF are dropped
 * and the last code point is incremented: the bytes analogue of dropping trailing 0xFF bytes and
 * incrementing the last byte, but always valid UTF-8, so it can be bound as TEXT.
 */
export function afterPrefix(prefix: string): string | undefined {
  // What SQLite stores for a lone surrogate (U+FFFD), so the bound compares like the stored keys.
  const points = Array.from(prefix.toWellFormed(), (c) => c.codePointAt(0)!);
  while (points.at(-1) === 0x10ffff) points.pop();
  const last = points.pop();
  if (last === undefined) return undefined;
  // Surrogates have no UTF-8 encoding: the character after U+D7FF is U+E000.
  points.push(last === 0xd7ff ? 0xe000 : last + 1);
  return String.fromCodePoint(...points);
}

/** The smallest string after `key`: nothing sorts between a string and itself followed by U+0000. */
const justAfter = (key: string) => `${key}\u0000`;

/**
 * Whether `marker` is a CommonPrefix of this listing: under the prefix, ending at its first delimiter.
 * Such a marker skips its whole group, as S3 does. A key equal to the prefix (`a/` listed with
 * prefix `a/`) is not one, though it ends in the delimiter: it is listed as a key and pages on as one.
 */
export function isCommonPrefix(marker: string, prefix: string, delimiter: string): boolean {
  if (delimiter === "" || !marker.startsWith(prefix)) return false;
  const cut = marker.indexOf(delimiter, prefix.length);
  return cut >= 0 && cut + delimiter.length === marker.length;
}

/** The first key a listing may return: after the marker (past its group for a CommonPrefix), never before the prefix; undefined when nothing can follow. */
function startFrom(prefix: string, marker: { value: string; isPrefix: boolean } | undefined): string | undefined {
  if (!marker) return prefix;
  const after = marker.isPrefix ? afterPrefix(marker.value) : justAfter(marker.value);
  if (after === undefined) return undefined;
  return compareKeys(after, prefix) < 0 ? prefix : after;
}

export interface ListPage {
  contents: S3Object[];
  prefixes: string[];
  truncated: boolean;
  /** The last key or common prefix returned (where the next page starts). */
  last?: { value: string; isPrefix: boolean };
}

/** Rows read by the first probe after a CommonPrefix: the next row is as likely another folder as a key. */
const FIRST_PROBE = 1;

/**
 * Walks keys from `from` (inclusive; undefined: none) that start with `prefix`, grouping by `delimiter`, up to `maxKeys` entries.
 * After each CommonPrefix the walk seeks past the whole group (`afterPrefix`) and reads one row there,
 * then twice as many while the rows are keys: a delimiter page costs O(prefixes + keys) rows read, not
 * a full batch per folder (500 folders once read 128k rows and held the loop 1-4.7 s). Only the rows a
 * page can use are read (`maxKeys` + 1 to know it is truncated). The loop is yielded between probes once
 * they have run for `sliceMs`: a page of 1,000 folders is 1,000 probes.
 */
export async function listKeys(
  app: AppContext,
  userId: string,
  opts: { prefix: string; delimiter: string; from: string | undefined; maxKeys: number; sliceMs?: number },
): Promise<ListPage> {
  const page: ListPage = { contents: [], prefixes: [], truncated: false };
  // max-keys=0 asks for nothing: an empty page that is not truncated, as AWS answers, so a
  // "while IsTruncated" loop ends instead of asking again without a token.
  if (opts.maxKeys <= 0) return page;
  const sliceMs = opts.sliceMs ?? SLICE_MS;
  const slicer = new Slicer(sliceMs);
  let from = opts.from;
  let batch = opts.delimiter ? FIRST_PROBE : PAGE;
  while (from !== undefined) {
    await slicer.step();
    // One row more than the page still has room for: that row only tells whether it is truncated.
    const limit = Math.min(batch, opts.maxKeys - page.contents.length - page.prefixes.length + 1);
    const rows = objectsFrom(app, userId, from, limit);
    let jumped = false;
    for (const row of rows) {
      if (!row.object_key.startsWith(opts.prefix)) return page;
      if (page.contents.length + page.prefixes.length >= opts.maxKeys) {
        page.truncated = true;
        return page;
      }
      const cut = opts.delimiter ? row.object_key.indexOf(opts.delimiter, opts.prefix.length) : -1;
      if (cut >= 0) {
        const common = row.object_key.slice(0, cut + opts.delimiter.length);
        page.prefixes.push(common);
        page.last = { value: common, isPrefix: true };
        // Skip the rest of the group in the database rather than row by row.
        from = afterPrefix(common);
        jumped = true;
        break;
      }
      page.contents.push(row);
      page.last = { value: row.object_key, isPrefix: false };
      from = justAfter(row.object_key);
    }
    if (jumped) batch = FIRST_PROBE;
    else if (rows.length < limit) return page;
    else batch = Math.min(batch * 2, PAGE);
  }
  return page;
}

/** Never reads an object's bytes: an object without a stored MD5 gets a stand-in ETag (see listingEtag). */
function contentsXml(app: AppContext, page: ListPage, enc: (s: string) => string) {
  const items = [];
  for (const o of page.contents) {
    items.push(
      el("Contents", [
        el("Key", enc(o.object_key)),
        el("LastModified", parseSqlTime(o.created_at).toISOString()),
        el("ETag", `"${listingEtag(app, o)}"`),
        el("Size", o.size),
        el("StorageClass", "STANDARD"),
      ]),
    );
  }
  return [...items, ...page.prefixes.map((p) => el("CommonPrefixes", el("Prefix", enc(p))))];
}

export async function listObjectsV1(app: AppContext, req: S3Request, sliceMs?: number): Promise<Response> {
  const prefix = req.query.get("prefix") ?? "";
  const delimiter = req.query.get("delimiter") ?? "";
  const marker = req.query.get("marker") ?? "";
  const maxKeys = pageSizeOf(req, "max-keys");
  const enc = nameEncoder(req);
  const from = startFrom(prefix, marker ? { value: marker, isPrefix: isCommonPrefix(marker, prefix, delimiter) } : undefined);
  const page = await listKeys(app, req.user.id, { prefix, delimiter, from, maxKeys, sliceMs });
  return xmlResponse(
    el(
      "ListBucketResult",
      [
        el("Name", req.bucket),
        el("Prefix", enc(prefix)),
        el("Marker", enc(marker)),
        el("MaxKeys", maxKeys),
        delimiter ? el("Delimiter", enc(delimiter)) : undefined,
        encodesNames(req) ? el("EncodingType", "url") : undefined,
        el("IsTruncated", page.truncated),
        page.truncated && delimiter && page.last ? el("NextMarker", enc(page.last.value)) : undefined,
        contentsXml(app, page, enc),
      ],
      { xmlns: S3_NS },
    ),
  );
}

/** Continuation tokens are opaque to clients: base64url of "k:<key>" or "p:<common prefix>". */
function encodeToken(last: { value: string; isPrefix: boolean }): string {
  return Buffer.from(`${last.isPrefix ? "p" : "k"}:${last.value}`).toString("base64url");
}

function decodeToken(token: string): { value: string; isPrefix: boolean } {
  const text = Buffer.from(token, "base64url").toString("utf8");
  if (!/^[kp]:/.test(text)) throw new S3Error("InvalidArgument", "continuation-token 无效");
  return { value: text.slice(2), isPrefix: text[0] === "p" };
}

export async function listObjectsV2(app: AppContext, req: S3Request, sliceMs?: number): Promise<Response> {
  const prefix = req.query.get("prefix") ?? "";
  const delimiter = req.query.get("delimiter") ?? "";
  const token = req.query.get("continuation-token");
  const after = req.query.get("start-after") ?? "";
  const maxKeys = pageSizeOf(req, "max-keys");
  const enc = nameEncoder(req);
  // The token, when there is one, says itself whether it was a CommonPrefix; start-after is read like a v1 marker.
  const marker = token ? decodeToken(token) : after ? { value: after, isPrefix: isCommonPrefix(after, prefix, delimiter) } : undefined;
  const page = await listKeys(app, req.user.id, { prefix, delimiter, from: startFrom(prefix, marker), maxKeys, sliceMs });
  return xmlResponse(
    el(
      "ListBucketResult",
      [
        el("Name", req.bucket),
        el("Prefix", enc(prefix)),
        delimiter ? el("Delimiter", enc(delimiter)) : undefined,
        el("MaxKeys", maxKeys),
        encodesNames(req) ? el("EncodingType", "url") : undefined,
        el("KeyCount", page.contents.length + page.prefixes.length),
        el("IsTruncated", page.truncated),
        token ? el("ContinuationToken", token) : undefined,
        page.truncated && page.last ? el("NextContinuationToken", encodeToken(page.last)) : undefined,
        after ? el("StartAfter", enc(after)) : undefined,
        contentsXml(app, page, enc),
      ],
      { xmlns: S3_NS },
    ),
  );
}
