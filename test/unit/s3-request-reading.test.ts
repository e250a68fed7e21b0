/**
 * How an `/s3/` request is read, rule by rule, in-process: bucket and key from the raw path
 * (per-segment percent-decoding, `%2F`, `+`, `//`, trailing `/`, non-ASCII, invalid escapes), what a
 * valid key is, the query (first value wins, `+` is a space), the page-size, encoding and part
 * parameters, and what a signed request reads as. Bench: helpers/s3-rules.ts.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { uploadIdleMs } from "../../src/http/idle-limits";
import { s3SecretFor, TokenRepo } from "../../src/auth/tokens";
import {
  authenticateS3,
  keyBytes,
  MAX_KEY_BYTES,
  nameEncoder,
  objectUrl,
  pageSizeOf,
  partNumberOf,
  requestMeta,
  splitS3Path,
  validObjectKey,
} from "../../src/s3/request";
import { rawTarget } from "../../src/shared/url-target";
import { accessKey, app, call, ORIGIN, refusal, signed, tokenId, useS3RuleContext, userId } from "../helpers/s3-rules";

useS3RuleContext();

describe("bucket and key from the raw path (splitS3Path)", () => {
  const cases: [rule: string, path: string, bucket: string, key: string][] = [
    ["the service root", "/s3", "", ""],
    ["the service root with its slash", "/s3/", "", ""],
    ["a bucket (rclone, no trailing slash)", "/s3/kura", "kura", ""],
    ["a bucket with a trailing slash (the SDK) is still the bucket", "/s3/kura/", "kura", ""],
    ["a key", "/s3/kura/2026/a.jpg", "kura", "2026/a.jpg"],
    ["each segment is decoded: %20 is a space", "/s3/kura/a%20b.jpg", "kura", "a b.jpg"],
    ["+ in the path is a plus, never a space", "/s3/kura/a+b.jpg", "kura", "a+b.jpg"],
    ["%2B is a plus", "/s3/kura/a%2Bb.jpg", "kura", "a+b.jpg"],
    ["%2F inside a segment decodes to a slash in the key", "/s3/kura/a%2Fb.jpg", "kura", "a/b.jpg"],
    ["an encoded trailing slash makes a folder key", "/s3/kura/dir%2F", "kura", "dir/"],
    ["a trailing slash is kept in the key", "/s3/kura/dir/", "kura", "dir/"],
    ["a double slash after the bucket starts the key with a slash", "/s3/kura//a.jpg", "kura", "/a.jpg"],
    ["a double slash inside the key is kept", "/s3/kura/a//b.jpg", "kura", "a//b.jpg"],
    ["UTF-8 escapes decode to the characters", "/s3/kura/%E6%B5%8B%E8%AF%95%20%E5%9B%BE%E7%89%87%2B1.webp", "kura", "测试 图片+1.webp"],
    ["a four-byte character", "/s3/kura/%F0%9F%98%80.png", "kura", "😀.png"],
    ["characters a client left unescaped are taken as they are", "/s3/kura/a!'()*~.jpg", "kura", "a!'()*~.jpg"],
    ["%25 is a literal percent", "/s3/kura/100%25.jpg", "kura", "100%.jpg"],
    ["the bucket is decoded too", "/s3/%6Bura/a.jpg", "kura", "a.jpg"],
    ["only a whole `/s3` segment is the mount", "/s3kura/a.jpg", "s3kura", "a.jpg"],
    ["a path without the mount (restic) names the bucket first", "/kura/a.jpg", "kura", "a.jpg"],
    ["an `s3` segment further on is part of the key", "/kura/s3/a.jpg", "kura", "s3/a.jpg"],
    ["an empty bucket segment: the bucket is empty, the rest is the key", "/s3//kura/a.jpg", "", "kura/a.jpg"],
    ["encoded dot segments are decoded, not resolved (the key check refuses them)", "/s3/kura/%2E%2E/a.jpg", "kura", "../a.jpg"],
  ];
  test.each(cases)("%s: %s", (_rule, path, bucket, key) => {
    expect(splitS3Path(path)).toEqual({ bucket, key });
  });

  const invalid: [rule: string, path: string][] = [
    ["a % not followed by two hex digits", "/s3/kura/%zz.jpg"],
    ["a lone % at the end", "/s3/kura/a%"],
    ["a truncated UTF-8 sequence", "/s3/kura/%E4%B8.jpg"],
    ["an invalid UTF-8 byte", "/s3/kura/%FF.jpg"],
    ["an invalid escape in a later segment", "/s3/kura/a/b%G1"],
    ["an invalid escape in the bucket", "/s3/ku%ra/a.jpg"],
    ["an invalid escape in a bucket-only path", "/s3/%E4"],
  ];
  test.each(invalid)("%s is 400 InvalidURI: %s", (_rule, path) => {
    expect(refusal(() => splitS3Path(path))).toBe("400 InvalidURI");
  });
});

describe("object keys (validObjectKey, keyBytes, objectUrl)", () => {
  const cases: [rule: string, key: string, valid: boolean][] = [
    ["a plain key", "a.jpg", true],
    ["a key with folders", "2026/11/a.jpg", true],
    ["non-ASCII", "测试/图片.webp", true],
    ["a space and a plus", "a b+c.jpg", true],
    ["three dots are a name", ".../a", true],
    ["a leading dot is a name", ".hidden", true],
    ["a trailing double dot is a name", "a..", true],
    ["DEL's neighbour U+0080 is allowed", "a\u0080b", true],
    ["the empty key", "", false],
    ["a leading slash", "/a.jpg", false],
    ["an empty segment", "a//b.jpg", false],
    ["a trailing slash (an empty last segment)", "a/", false],
    ["a `.` segment", "a/./b.jpg", false],
    ["a `..` segment", "a/../b.jpg", false],
    ["only `.`", ".", false],
    ["only `..`", "..", false],
    ["a backslash", "a\\b.jpg", false],
    ["NUL", "a\u0000b", false],
    ["U+001F", "a\u001fb", false],
    ["a tab", "a\tb", false],
    ["DEL", "a\u007fb", false],
  ];
  test.each(cases)("%s: %j → %p", (_rule, key, valid) => {
    expect(validObjectKey(key)).toBe(valid);
  });

  test("a key's length is its UTF-8 bytes, limited to 1024", () => {
    expect(MAX_KEY_BYTES).toBe(1024);
    expect([keyBytes(""), keyBytes("a"), keyBytes("é"), keyBytes("中"), keyBytes("😀"), keyBytes("a中😀")]).toEqual([0, 1, 2, 3, 4, 8]);
  });

  test("objectUrl encodes each segment and keeps the slashes", () => {
    expect(objectUrl("https://h.example", "kura", "2026/a b+c/中.jpg")).toBe("https://h.example/s3/kura/2026/a%20b%2Bc/%E4%B8%AD.jpg");
    expect(objectUrl("https://h.example", "kura", "a%2F?#.jpg")).toBe("https://h.example/s3/kura/a%252F%3F%23.jpg");
  });
});

describe("query parameters read by the listings and parts", () => {
  const q = (entries: Record<string, string> = {}) => ({ query: new Map(Object.entries(entries)) });
  const sizes: [rule: string, raw: string | undefined, expected: number | string][] = [
    ["absent is 1000", undefined, 1000],
    ["empty is 1000", "", 1000],
    ["0 asks for nothing", "0", 0],
    ["1", "1", 1],
    ["999", "999", 999],
    ["1000 is the limit", "1000", 1000],
    ["1001 is cut to 1000", "1001", 1000],
    ["a huge number is cut to 1000", "99999999999999999999", 1000],
    ["leading zeros are decimal", "007", 7],
    ["a negative number", "-1", "400 InvalidArgument"],
    ["not a number", "abc", "400 InvalidArgument"],
    ["a fraction", "1.5", "400 InvalidArgument"],
    ["an exponent", "1e3", "400 InvalidArgument"],
    ["a plus sign", "+5", "400 InvalidArgument"],
    ["hex", "0x10", "400 InvalidArgument"],
    ["a leading blank", " 5", "400 InvalidArgument"],
    ["a trailing blank", "5 ", "400 InvalidArgument"],
  ];
  test.each(sizes)("max-keys %s: %p → %p", (_rule, raw, expected) => {
    const req = q(raw === undefined ? {} : { "max-keys": raw });
    const out = typeof expected === "number" ? pageSizeOf(req, "max-keys") : refusal(() => pageSizeOf(req, "max-keys"));
    expect(out).toBe(expected);
  });

  test("the refusal names the parameter it was given", () => {
    for (const name of ["max-keys", "max-uploads"]) {
      expect(() => pageSizeOf(q({ [name]: "x" }), name)).toThrow(name);
    }
    // Only the named parameter is read.
    expect(pageSizeOf(q({ "max-keys": "5" }), "max-uploads")).toBe(1000);
  });

  const encodings: [rule: string, type: string | undefined, expected: string][] = [
    ["absent leaves names alone", undefined, "a b/中%.jpg"],
    ["empty leaves names alone", "", "a b/中%.jpg"],
    ["url percent-encodes, slashes included", "url", "a%20b%2F%E4%B8%AD%25.jpg"],
    ["URL in capitals is refused", "URL", "400 InvalidArgument"],
    ["any other type is refused", "xml", "400 InvalidArgument"],
  ];
  test.each(encodings)("encoding-type %s", (_rule, type, expected) => {
    const req = q(type === undefined ? {} : { "encoding-type": type });
    const out = refusal(() => nameEncoder(req));
    expect(out === "ok" ? nameEncoder(req)("a b/中%.jpg") : out).toBe(expected);
  });

  const parts: [raw: string, expected: number | string][] = [
    ["1", 1],
    ["2", 2],
    ["9999", 9999],
    ["10000", 10000],
    ["00001", 1],
    ["0", "400 InvalidArgument"],
    ["10001", "400 InvalidArgument"],
    ["99999", "400 InvalidArgument"],
    ["000001", "400 InvalidArgument"],
    ["-1", "400 InvalidArgument"],
    ["", "400 InvalidArgument"],
    ["1.0", "400 InvalidArgument"],
    [" 1", "400 InvalidArgument"],
    ["1 ", "400 InvalidArgument"],
    ["a1", "400 InvalidArgument"],
  ];
  test.each(parts)("partNumber %p → %p", (raw, expected) => {
    expect(typeof expected === "number" ? partNumberOf(raw) : refusal(() => partNumberOf(raw))).toBe(expected);
  });

  test("requestMeta keeps x-amz-meta-* (lower-cased) and a non-empty Content-Type, nothing else", () => {
    const request = new Request(ORIGIN, {
      headers: {
        "X-Amz-Meta-Mtime": "1795384597.94142935",
        "x-amz-meta-md5chksum": "abc==",
        "x-amz-acl": "private",
        "content-type": "image/png",
        "x-meta-x": "1",
      },
    });
    expect(requestMeta(request)).toEqual({ "x-amz-meta-mtime": "1795384597.94142935", "x-amz-meta-md5chksum": "abc==", "content-type": "image/png" });
    expect(requestMeta(new Request(ORIGIN, { headers: { "content-type": "" } }))).toEqual({});
    expect(requestMeta(new Request(ORIGIN))).toEqual({});
  });
});

describe("authenticateS3: what a signed request reads as", () => {
  test("method, bucket, key, query (first value wins; + is a space in the query), principal, request id and idle deadline", () => {
    const request = signed("GET", "/s3/kura/dir/a+b%20c.jpg?prefix=a+b&prefix=second&delimiter=&marker=a%2Bb&x-id=GetObject&bare");
    const req = authenticateS3(app, request, "REQ123");
    expect({ method: req.method, bucket: req.bucket, key: req.key, requestId: req.requestId, request: req.request === request }).toEqual({
      method: "GET",
      bucket: "kura",
      key: "dir/a+b c.jpg",
      requestId: "REQ123",
      request: true,
    });
    expect([...req.query]).toEqual([
      ["prefix", "a b"],
      ["delimiter", ""],
      ["marker", "a+b"],
      ["x-id", "GetObject"],
      ["bare", ""],
    ]);
    expect([req.token.id, req.user.id, req.auth.accessKeyId]).toEqual([tokenId, userId, accessKey]);
    expect(req.idleMs).toBe(uploadIdleMs(app.settings.get().upload_idle_timeout_seconds));
    expect(req.idleMs).toBeGreaterThan(0);
  });

  test("every use is recorded on the token", () => {
    app.db.query("UPDATE tokens SET last_used_at = NULL WHERE id = ?").run(tokenId);
    authenticateS3(app, signed("GET", "/s3/kura"), "R");
    expect(new TokenRepo(app.db).byId(tokenId)!.last_used_at).not.toBeNull();
  });

  test("a token without the upload scope is 403 AccessDenied, on every route", async () => {
    const repo = new TokenRepo(app.db);
    const other = repo.issue(userId, "s3-no-scope", 0);
    app.db.query("UPDATE tokens SET scopes = 'read' WHERE id = ?").run(other.id);
    const as = { key: other.prefix, secret: s3SecretFor(app.key, repo.byId(other.id)!) };
    expect(refusal(() => authenticateS3(app, signed("GET", "/s3/kura", as), "R"))).toBe("403 AccessDenied");
    expect((await call("GET", "/s3/", as)).outcome).toBe("403 AccessDenied");
  });
});

describe("property: a key encoded as clients encode it routes back to itself", () => {
  /** Pieces that stress the path: escapes, `+`, `%`, reserved characters, slashes, multi-byte UTF-8. */
  const piece = fc.constantFrom(
    "a",
    "Z",
    "0",
    "/",
    "%",
    "%2F",
    "+",
    " ",
    "?",
    "#",
    "&",
    "=",
    "!",
    "'",
    "(",
    "*",
    "~",
    "-",
    "_",
    ".",
    "中",
    "é",
    "😀",
    "\uE000",
    "\\",
    ";",
    ":",
    "@",
    "$",
    ",",
  );
  const key = fc
    .array(fc.oneof(piece, fc.string({ unit: "grapheme", maxLength: 3 })), { maxLength: 12 })
    .map((parts) => parts.join(""))
    // The URL parser resolves `.` and `..` segments before the server sees them.
    .filter((k) => !k.split("/").some((s) => s === "." || s === ".."));

  test("objectUrl → signed request → authenticateS3 gives the key back, and the query value back", () => {
    fc.assert(
      fc.property(key, key, (k, prefix) => {
        const url = objectUrl(ORIGIN, "kura", k);
        const target = `${url.slice(ORIGIN.length)}?prefix=${encodeURIComponent(prefix)}`;
        const req = authenticateS3(app, signed("GET", target), "P");
        expect({ bucket: req.bucket, key: req.key, prefix: req.query.get("prefix") }).toEqual({ bucket: "kura", key: k, prefix });
        expect(splitS3Path(rawTarget(url).path)).toEqual({ bucket: "kura", key: k });
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });
});
