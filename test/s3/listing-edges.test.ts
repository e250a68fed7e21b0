/**
 * Listing edge cases of the /s3/ surface against a real Kura: paging must return exactly what S3 would
 * (keys in UTF-8 byte order, each CommonPrefix once) and must end, whatever characters keys contain.
 * A key with U+10FFFF right after the delimiter once made every delimiter listing repeat its group
 * forever (the group was skipped with `prefix + U+10FFFF`, which that key sorts after).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fuzzParams } from "../fuzz/fuzz-support";
import { makePng } from "../helpers/images";
import { signedRequest, startS3Fixture, writeRcloneS3Config, type S3Fixture } from "./s3-setup";

let f: S3Fixture;
let png: Uint8Array;

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  png = await makePng(8, 8, 3);
});
afterAll(() => f.server.dispose());

const encodeKey = (key: string) => key.split("/").map(encodeURIComponent).join("/");
const escapeXml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const unescapeXml = (s: string) =>
  s.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (_, e: string) => {
    if (e[0] === "#") return String.fromCodePoint(e[1] === "x" || e[1] === "X" ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1)));
    return { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" }[e.toLowerCase()]!;
  });

/** S3's order, written here independently of the server: bytes of the UTF-8 encodings. */
const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

async function put(key: string) {
  // Keys ending in `/` are folder markers (zero bytes); every other key is an image.
  const res = await signedRequest(f, "PUT", `/s3/kura/${encodeKey(key)}`, { body: key.endsWith("/") ? new Uint8Array() : png });
  if (res.status !== 200) throw new Error(`PUT ${JSON.stringify(key)} → ${res.status} ${await res.text()}`);
}

async function removeAll(keys: string[]) {
  const body = `<Delete>${keys.map((k) => `<Object><Key>${escapeXml(k)}</Key></Object>`).join("")}</Delete>`;
  const res = await signedRequest(f, "POST", "/s3/kura?delete=", { body });
  expect(res.status).toBe(200);
}

interface Query {
  v2: boolean;
  prefix: string;
  delimiter: string;
  maxKeys: number;
  url: boolean;
}

interface Page {
  keys: string[];
  prefixes: string[];
  truncated: boolean;
  next?: string;
  keyCount?: number;
}

const tags = (xml: string, outer: string, inner: string) =>
  [...xml.matchAll(new RegExp(`<${outer}>(?:(?!</${outer}>).)*?<${inner}>([^<]*)</${inner}>`, "gs"))].map((m) => m[1]!);
const single = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];

async function listPage(q: Query, marker: string | undefined): Promise<Page> {
  const params: [string, string][] = [
    ["prefix", q.prefix],
    ["delimiter", q.delimiter],
    ["max-keys", String(q.maxKeys)],
  ];
  if (q.v2) params.push(["list-type", "2"]);
  if (q.url) params.push(["encoding-type", "url"]);
  if (marker !== undefined) params.push([q.v2 ? "continuation-token" : "marker", marker]);
  const query = params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
  const res = await signedRequest(f, "GET", `/s3/kura?${query}`);
  const xml = await res.text();
  if (res.status !== 200) throw new Error(`list ${query} → ${res.status} ${xml}`);
  const decode = (s: string) => (q.url ? decodeURIComponent(unescapeXml(s)) : unescapeXml(s));
  const next = single(xml, q.v2 ? "NextContinuationToken" : "NextMarker");
  const keyCount = single(xml, "KeyCount");
  return {
    keys: tags(xml, "Contents", "Key").map(decode),
    prefixes: tags(xml, "CommonPrefixes", "Prefix").map(decode),
    truncated: single(xml, "IsTruncated") === "true",
    next: next === undefined ? undefined : q.v2 ? next : decode(next),
    keyCount: keyCount === undefined ? undefined : Number(keyCount),
  };
}

/** Every page, following NextContinuationToken / NextMarker (else the last key, as S3 clients do); fails instead of looping. */
async function pageThrough(q: Query, maxPages: number): Promise<Page[]> {
  const pages: Page[] = [];
  let marker: string | undefined;
  for (;;) {
    const page = await listPage(q, marker);
    pages.push(page);
    if (!page.truncated) return pages;
    if (pages.length >= maxPages) throw new Error(`still truncated after ${pages.length} pages: ${JSON.stringify(pages.slice(-2))}`);
    if (q.v2 || q.delimiter) expect(page.next).toBeDefined();
    marker = page.next ?? page.keys.at(-1);
    expect(marker).toBeDefined();
  }
}

/** What the listing must hold, by brute force: matching keys in byte order, each CommonPrefix once, where its first key was. */
function bruteForce(keys: string[], prefix: string, delimiter: string): { value: string; isPrefix: boolean }[] {
  const out: { value: string; isPrefix: boolean }[] = [];
  for (const key of keys.filter((k) => k.startsWith(prefix)).sort(byUtf8)) {
    const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
    if (cut < 0) out.push({ value: key, isPrefix: false });
    else {
      const common = key.slice(0, cut + delimiter.length);
      if (!out.some((e) => e.isPrefix && e.value === common)) out.push({ value: common, isPrefix: true });
    }
  }
  return out;
}

/** Pages are consecutive slices of the brute-force listing, each full but the last, and the paging ends. */
async function expectListing(keys: string[], q: Query) {
  const expected = bruteForce(keys, q.prefix, q.delimiter);
  const pages = await pageThrough(q, expected.length + 2);
  const label = JSON.stringify({ keys, q });
  expect(pages.length, label).toBe(Math.max(1, Math.ceil(expected.length / q.maxKeys)));
  pages.forEach((page, i) => {
    const slice = expected.slice(i * q.maxKeys, (i + 1) * q.maxKeys);
    expect({ keys: page.keys, prefixes: page.prefixes }, `${label} page ${i}`).toEqual({
      keys: slice.filter((e) => !e.isPrefix).map((e) => e.value),
      prefixes: slice.filter((e) => e.isPrefix).map((e) => e.value),
    });
    if (q.v2) expect(page.keyCount).toBe(slice.length);
  });
}

describe("a key with U+10FFFF right after the delimiter", () => {
  const keys = ["o/\u{10FFFF}.png", "o/x.png", "p.png", "z.png"];
  beforeAll(async () => {
    for (const key of keys) await put(key);
  });
  afterAll(() => removeAll(keys));

  test("its group is one CommonPrefix and the keys after it are listed, v1 and v2, one page or many", async () => {
    for (const v2 of [false, true]) {
      for (const maxKeys of [1, 2, 1000]) await expectListing(keys, { v2, prefix: "", delimiter: "/", maxKeys, url: false });
    }
    const all = await listPage({ v2: false, prefix: "", delimiter: "/", maxKeys: 1000, url: false }, undefined);
    expect(all).toMatchObject({ keys: ["p.png", "z.png"], prefixes: ["o/"], truncated: false });
  });

  test("a delimiter that is U+10FFFF itself (the group's successor drops it and increments the character before)", async () => {
    const more = ["q\u{10FFFF}\u{10FFFF}.png", "q\u{10FFFF}a.png", "q.png", "r.png"];
    for (const key of more) await put(key);
    try {
      for (const maxKeys of [1, 3]) await expectListing([...keys, ...more], { v2: true, prefix: "", delimiter: "\u{10FFFF}", maxKeys, url: true });
    } finally {
      await removeAll(more);
    }
  });

  test("rclone lsf lists it once and ends", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-rclone-lsf-"));
    try {
      const config = join(dir, "rclone.conf");
      writeRcloneS3Config(f, config);
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "AWS_CA_BUNDLE" && !k.startsWith("RCLONE_")) env[k] = v;
      // `timeout`: a listing that never ends must fail this test, not hang the run.
      const proc = Bun.spawn(["timeout", "30", "rclone", "--config", config, "--retries", "1", "--low-level-retries", "1", "lsf", "k:kura"], {
        env,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      expect(await proc.exited, err).toBe(0);
      expect(out.split("\n").filter(Boolean)).toEqual(["o/", "p.png", "z.png"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("a key equal to the prefix that ends in the delimiter (a folder marker) pages on as a key, not as a CommonPrefix", async () => {
  const keys = ["d/", "d/x.png", "d/y/z.png", "e.png"];
  for (const key of keys) await put(key);
  try {
    // v1's NextMarker is then `d/`: read as a CommonPrefix it would skip every other key under the prefix.
    for (const v2 of [false, true]) await expectListing(keys, { v2, prefix: "d/", delimiter: "/", maxKeys: 1, url: false });
    const first = await listPage({ v2: false, prefix: "d/", delimiter: "/", maxKeys: 1, url: false }, undefined);
    expect(first).toMatchObject({ keys: ["d/"], prefixes: [], truncated: true, next: "d/" });
  } finally {
    await removeAll(keys);
  }
});

describe("ListMultipartUploads", () => {
  const uploadIds: [string, string][] = [];
  beforeAll(async () => {
    for (const key of ["u/\u{10FFFF}.png", "u/x.png", "v.png"]) {
      const res = await signedRequest(f, "POST", `/s3/kura/${encodeKey(key)}?uploads=`);
      const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await res.text())?.[1];
      if (!id) throw new Error(`no upload id for ${key}`);
      uploadIds.push([key, id]);
    }
  });
  afterAll(async () => {
    for (const [key, id] of uploadIds) await signedRequest(f, "DELETE", `/s3/kura/${encodeKey(key)}?uploadId=${id}`);
  });

  const listUploads = async (query: string) => {
    const xml = await (await signedRequest(f, "GET", `/s3/kura?uploads=&${query}`)).text();
    return {
      keys: tags(xml, "Upload", "Key").map(unescapeXml),
      prefixes: tags(xml, "CommonPrefixes", "Prefix").map(unescapeXml),
      truncated: single(xml, "IsTruncated") === "true",
      nextKey: single(xml, "NextKeyMarker"),
      nextId: single(xml, "NextUploadIdMarker"),
    };
  };

  test("a CommonPrefix key-marker skips its whole group, U+10FFFF keys included, and paging ends", async () => {
    const seen: string[] = [];
    let marker = "";
    let idMarker = "";
    for (let page = 0; ; page++) {
      expect(page, JSON.stringify(seen)).toBeLessThan(4);
      const r = await listUploads(`delimiter=%2F&max-uploads=1&key-marker=${encodeURIComponent(marker)}&upload-id-marker=${idMarker}`);
      seen.push(...r.prefixes.map((p) => `P:${p}`), ...r.keys.map((k) => `K:${k}`));
      if (!r.truncated) break;
      marker = unescapeXml(r.nextKey ?? "");
      idMarker = r.nextId ?? "";
    }
    expect(seen).toEqual(["P:u/", "K:v.png"]);
  });

  test("max-uploads=0 is an empty page that is not truncated, with uploads open", async () => {
    expect(await listUploads("max-uploads=0")).toMatchObject({ keys: [], prefixes: [], truncated: false, nextKey: undefined });
  });
});

describe("max-keys=0", () => {
  beforeAll(() => put("mk0.png"));
  afterAll(() => removeAll(["mk0.png"]));

  test("is an empty page that is not truncated and has no token, v1 and v2, with objects stored", async () => {
    for (const v2 of [false, true]) {
      for (const delimiter of ["", "/"]) {
        const page = await listPage({ v2, prefix: "", delimiter, maxKeys: 0, url: false }, undefined);
        expect(page).toEqual({ keys: [], prefixes: [], truncated: false, next: undefined, keyCount: v2 ? 0 : undefined });
      }
    }
  });
});

/**
 * Keys are segments joined by separators that are also the delimiters listed with. A segment often
 * starts with U+10FFFF (the character right after a delimiter that the old group skip could not
 * pass) or U+FFFF; the rest is one of a few characters around the places where UTF-16 order and
 * UTF-8 order differ (U+D7FF, U+E000, U+FFFF, astral), so keys share prefixes and groups have
 * several members. `--` with delimiter `-` makes delimiter runs.
 */
const LEADS = ["", "\u{10FFFF}", "\u{10FFFF}\u{10FFFF}", "\uFFFF"];
const RESTS = ["a", "b", "é", "图", "\uD7FF", "\uE000", "\uFFFF", "\u{10000}", "\u{1F600}", "a\u{10FFFF}"];
const SEPARATORS = ["/", "-", "--", "\u{10FFFF}", "图"];
const DELIMITERS = ["", "/", "-", "--", "\u{10FFFF}", "图", "/\u{10FFFF}", "\uD7FF"];

const segmentArb = fc.tuple(fc.constantFrom(...LEADS), fc.constantFrom(...RESTS)).map(([lead, rest]) => lead + rest);
/** Valid object keys (no empty segment); a trailing `/` makes a folder marker. */
const keyArb = fc
  .tuple(fc.array(fc.tuple(segmentArb, fc.constantFrom(...SEPARATORS)), { maxLength: 2 }), segmentArb, fc.boolean())
  .map(([parts, last, folder]) => parts.map(([seg, sep]) => seg + sep).join("") + last + (folder ? "/" : ""));

/** A listing of those keys: no prefix, a prefix cut from one of them (so keys equal to a prefix occur), or a fixed one. */
const queryArb = fc.record({
  v2: fc.boolean(),
  delimiter: fc.constantFrom(...DELIMITERS),
  maxKeys: fc.integer({ min: 1, max: 3 }),
  url: fc.boolean(),
  prefix: fc.oneof(
    fc.constant({ own: "" }),
    fc.record({ from: fc.nat(), length: fc.nat({ max: 12 }) }),
    fc.constantFrom("\u{10FFFF}", "\uFFFF", "a", "a/").map((own) => ({ own })),
  ),
});

test("property: paging (v1 marker and v2 token, any prefix and delimiter, max-keys 1–3) equals the brute-force listing and ends", async () => {
  await fc.assert(
    fc.asyncProperty(fc.uniqueArray(keyArb, { minLength: 3, maxLength: 12 }), fc.array(queryArb, { minLength: 3, maxLength: 5 }), async (keys, queries) => {
      for (const key of keys) await put(key);
      try {
        for (const q of queries) {
          const p = q.prefix;
          const chars = "own" in p ? [] : Array.from(keys[p.from % keys.length]!);
          const prefix = "own" in p ? p.own : chars.slice(0, p.length % (chars.length + 1)).join("");
          await expectListing(keys, { v2: q.v2, prefix, delimiter: q.delimiter, maxKeys: q.maxKeys, url: q.url });
        }
      } finally {
        await removeAll(keys);
      }
    }),
    fuzzParams(),
  );
}, 120_000);
