/**
 * SigV4 building blocks: canonical URI / query / headers, canonical request, string to sign,
 * signing key. Pure functions over already-split request parts; sigv4.ts decides what to feed them.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { S3AuthError } from "./s3-auth-error";

export const ALGORITHM = "AWS4-HMAC-SHA256";
export const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

export function hmac(key: Uint8Array | string, data: string): Buffer {
  return createHmac("sha256", key).update(data, "utf8").digest();
}

/** kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service), "aws4_request"). */
export function deriveSigningKey(secret: string, date: string, region: string, service: string): Buffer {
  const kDate = hmac(`AWS4${secret}`, date);
  return hmac(hmac(hmac(kDate, region), service), "aws4_request");
}

/** Compare two hex signatures without leaking where they differ. */
export function signaturesEqual(expectedHex: string, givenHex: string): boolean {
  const a = Buffer.from(expectedHex, "utf8");
  const b = Buffer.from(givenHex.toLowerCase(), "utf8");
  // Lengths are public (always 64 for a well-formed signature); only the content must be compared in constant time.
  return a.length === b.length && timingSafeEqual(a, b);
}

/** AWS UriEncode: everything except A-Z a-z 0-9 - _ . ~ becomes %XX (upper case), UTF-8 first. */
export function awsUriEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function decodeOrThrow(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new S3AuthError("InvalidURI", "请求地址中含有无效的百分号编码");
  }
}

/**
 * Canonical URI candidates. S3 signs each path segment URI-encoded once with `/` kept; a client that
 * sent a strictly encoded path (all 313 captured requests did) gives one candidate, equal to the raw path.
 * A client that sent some character unencoded (e.g. `!`) but signed its strict form is covered by the
 * re-encoded candidate; one that signed exactly what it sent is covered by the raw one.
 */
export function canonicalUriCandidates(rawPath: string): string[] {
  const path = rawPath === "" ? "/" : rawPath;
  let strict: string | undefined;
  try {
    strict = path
      .split("/")
      .map((seg) => awsUriEncode(decodeURIComponent(seg)))
      .join("/");
  } catch {
    strict = undefined; // undecodable segment: only the raw form can have been signed
  }
  return strict === undefined || strict === path ? [path] : [strict, path];
}

/** Decoded `[key, value]` pairs of a raw query string, in wire order. Bare `k` becomes `["k", ""]`. */
export function parseQuery(rawQuery: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const part of rawQuery.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const k = eq < 0 ? part : part.slice(0, eq);
    const v = eq < 0 ? "" : part.slice(eq + 1);
    // Go clients (aws-sdk-go v1, minio-go) form-encode spaces as `+` and sign them as %20.
    pairs.push([decodeOrThrow(k.replace(/\+/g, " ")), decodeOrThrow(v.replace(/\+/g, " "))]);
  }
  return pairs;
}

/** Sorted, strictly re-encoded `k=v` pairs; empty values stay as `k=`. */
export function canonicalQuery(pairs: [string, string][], exclude?: string): string {
  return pairs
    .filter(([k]) => k !== exclude)
    .map(([k, v]) => [awsUriEncode(k), awsUriEncode(v)] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
}

/** Header values grouped by lower-case name, wire order kept. Works for `Headers` and `[name, value]` lists. */
export function groupHeaders(headers: Iterable<readonly [string, string]>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, value] of headers) {
    const key = name.toLowerCase();
    const list = out.get(key);
    if (list) list.push(value);
    else out.set(key, [value]);
  }
  return out;
}

function trimAll(value: string): string {
  return value.trim().replace(/\s+/g, " ");
}

/**
 * The canonical value of one header. Duplicates are joined with `,`, except Content-Length: rclone's
 * presigned PUT sends it twice with the same value and signs it once, and Bun hands it over as "287, 287".
 */
export function canonicalHeaderValue(name: string, values: string[] | undefined): string {
  if (!values) return "";
  if (name === "content-length") {
    const parts = values.flatMap((v) => v.split(",")).map((v) => v.trim());
    if (parts.every((p) => p === parts[0])) return parts[0] ?? "";
  }
  return values.map(trimAll).join(",");
}

export function canonicalHeaders(signedHeaders: string[], grouped: Map<string, string[]>): string {
  return signedHeaders.map((name) => `${name}:${canonicalHeaderValue(name, grouped.get(name))}\n`).join("");
}

export interface CanonicalParts {
  method: string;
  canonicalUri: string;
  canonicalQuery: string;
  canonicalHeaders: string;
  signedHeaders: string[];
  payloadHash: string;
}

export function canonicalRequest(p: CanonicalParts): string {
  return [p.method.toUpperCase(), p.canonicalUri, p.canonicalQuery, p.canonicalHeaders, p.signedHeaders.join(";"), p.payloadHash].join("\n");
}

export function stringToSign(amzDate: string, scope: string, canonicalReq: string): string {
  return `${ALGORITHM}\n${amzDate}\n${scope}\n${sha256Hex(canonicalReq)}`;
}

export function signHex(signingKey: Uint8Array, toSign: string): string {
  return createHmac("sha256", signingKey).update(toSign, "utf8").digest("hex");
}

/** `YYYYMMDDTHHMMSSZ` → epoch ms, or undefined when it is not a valid ISO 8601 basic timestamp. */
export function parseAmzDate(value: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(ms);
  return back.getUTCMonth() === mo - 1 && back.getUTCDate() === d && h < 24 && mi < 60 && s < 60 ? ms : undefined;
}

/** epoch ms → `YYYYMMDDTHHMMSSZ` (used when a client dates its request with the `Date` header only). */
export function formatAmzDate(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}
