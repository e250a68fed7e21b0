/**
 * ListObjects (v1: marker/NextMarker, what rclone's provider Other uses) and ListObjectsV2
 * (continuation tokens, what the SDK uses) over the user's keyed images, in byte order, with
 * delimiter grouping into CommonPrefixes.
 */
import type { AppContext } from "../../context";
import { parseSqlTime } from "../../db/time";
import { S3Error } from "../errors";
import { md5Of, objectsAfter, type S3Object } from "../object-repo";
import type { S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";

/** Sorts after every key that starts with a given prefix (U+10FFFF is the largest code point, F4 8F BF BF). */
const AFTER_ALL = "\u{10FFFF}";
const PAGE = 256;

export interface ListPage {
  contents: S3Object[];
  prefixes: string[];
  truncated: boolean;
  /** The last key or common prefix returned (where the next page starts). */
  last?: { value: string; isPrefix: boolean };
}

/** Walks keys after `start` (exclusive) that start with `prefix`, grouping by `delimiter`, up to `maxKeys` entries. */
export function listKeys(app: AppContext, userId: string, opts: { prefix: string; delimiter: string; start: string; maxKeys: number }): ListPage {
  const page: ListPage = { contents: [], prefixes: [], truncated: false };
  let cursor = opts.start;
  for (;;) {
    const rows = objectsAfter(app, userId, cursor, opts.prefix, PAGE);
    if (rows.length === 0) return page;
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
        cursor = common + AFTER_ALL;
        jumped = true;
        break;
      }
      page.contents.push(row);
      page.last = { value: row.object_key, isPrefix: false };
      cursor = row.object_key;
    }
    if (!jumped && rows.length < PAGE) return page;
  }
}

function maxKeysOf(req: S3Request): number {
  const raw = req.query.get("max-keys");
  if (raw === undefined || raw === "") return 1000;
  if (!/^\d+$/.test(raw)) throw new S3Error("InvalidArgument", "max-keys 必须是非负整数");
  return Math.min(Number(raw), 1000);
}

function encoder(req: S3Request): (s: string) => string {
  const type = req.query.get("encoding-type");
  if (type === undefined || type === "") return (s) => s;
  if (type !== "url") throw new S3Error("InvalidArgument", "encoding-type 只支持 url");
  return (s) => encodeURIComponent(s);
}

async function contentsXml(app: AppContext, page: ListPage, enc: (s: string) => string) {
  const items = [];
  for (const o of page.contents) {
    items.push(
      el("Contents", [
        el("Key", enc(o.object_key)),
        el("LastModified", parseSqlTime(o.created_at).toISOString()),
        el("ETag", `"${await md5Of(app, o)}"`),
        el("Size", o.size),
        el("StorageClass", "STANDARD"),
      ]),
    );
  }
  return [...items, ...page.prefixes.map((p) => el("CommonPrefixes", el("Prefix", enc(p))))];
}

/** A marker or start-after that is a CommonPrefix (`dir/`) skips every key under it, as S3 does. */
function startAfter(value: string, delimiter: string, isPrefix: boolean): string {
  return isPrefix || (delimiter !== "" && value.endsWith(delimiter)) ? value + AFTER_ALL : value;
}

export async function listObjectsV1(app: AppContext, req: S3Request): Promise<Response> {
  const prefix = req.query.get("prefix") ?? "";
  const delimiter = req.query.get("delimiter") ?? "";
  const marker = req.query.get("marker") ?? "";
  const maxKeys = maxKeysOf(req);
  const enc = encoder(req);
  const page = listKeys(app, req.user.id, { prefix, delimiter, start: marker ? startAfter(marker, delimiter, false) : "", maxKeys });
  return xmlResponse(
    el(
      "ListBucketResult",
      [
        el("Name", req.bucket),
        el("Prefix", enc(prefix)),
        el("Marker", enc(marker)),
        el("MaxKeys", maxKeys),
        delimiter ? el("Delimiter", enc(delimiter)) : undefined,
        req.query.has("encoding-type") ? el("EncodingType", "url") : undefined,
        el("IsTruncated", page.truncated),
        page.truncated && delimiter && page.last ? el("NextMarker", enc(page.last.value)) : undefined,
        await contentsXml(app, page, enc),
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

export async function listObjectsV2(app: AppContext, req: S3Request): Promise<Response> {
  const prefix = req.query.get("prefix") ?? "";
  const delimiter = req.query.get("delimiter") ?? "";
  const token = req.query.get("continuation-token");
  const after = req.query.get("start-after") ?? "";
  const maxKeys = maxKeysOf(req);
  const enc = encoder(req);
  let start = after ? startAfter(after, delimiter, false) : "";
  if (token) {
    const t = decodeToken(token);
    start = startAfter(t.value, delimiter, t.isPrefix);
  }
  const page = listKeys(app, req.user.id, { prefix, delimiter, start, maxKeys });
  return xmlResponse(
    el(
      "ListBucketResult",
      [
        el("Name", req.bucket),
        el("Prefix", enc(prefix)),
        delimiter ? el("Delimiter", enc(delimiter)) : undefined,
        el("MaxKeys", maxKeys),
        req.query.has("encoding-type") ? el("EncodingType", "url") : undefined,
        el("KeyCount", page.contents.length + page.prefixes.length),
        el("IsTruncated", page.truncated),
        token ? el("ContinuationToken", token) : undefined,
        page.truncated && page.last ? el("NextContinuationToken", encodeToken(page.last)) : undefined,
        after ? el("StartAfter", enc(after)) : undefined,
        await contentsXml(app, page, enc),
      ],
      { xmlns: S3_NS },
    ),
  );
}
