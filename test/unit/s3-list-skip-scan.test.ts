/**
 * ListObjects / ListObjectsV2 in-process, against a brute-force model of S3's listing over random key
 * sets (fast-check, fixed seed): a delimiter listing seeks past each CommonPrefix and reads one row
 * there (the skip-scan of issue 10), and yields between probes. Whatever the keys (multi-byte UTF-8,
 * U+FFFF / U+10FFFF, prefixes that are prefixes of each other, runs of `/`), every page must be the
 * next slice of the model: max-keys counts keys and prefixes together, the token / marker / start-after
 * go on where the page ended (across prefixes), IsTruncated and KeyCount are exact, encoding-type=url
 * round-trips. The handlers run with `sliceMs` 0 too (a yield before every probe).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { listObjectsV1, listObjectsV2 } from "../../src/s3/ops/list";
import type { S3Request } from "../../src/s3/request";
import { fuzzParams } from "../fuzz/fuzz-support";
import { openContext } from "../helpers/context";

let dir: string;
let ctx: Awaited<ReturnType<typeof openContext>>;
let app: AppContext;
let blobId: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-s3-skip-scan-"));
  ctx = await openContext(dir);
  app = ctx.app;
  blobId = Number(
    app.db
      .query(
        "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES ('s', 'k', 'image/png', 1, 1, 1, 1, '2025-01-01 00:00:00', '0123456789abcdef0123456789abcdef')",
      )
      .run().lastInsertRowid,
  );
});
afterAll(() => {
  ctx.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Keys ending in `/` are folder markers (their own table), the others images: listings merge both. */
function store(keys: string[]) {
  app.db.transaction(() => {
    app.db.exec("DELETE FROM images; DELETE FROM s3_folder_markers");
    const image = app.db.query(
      "INSERT INTO images (id, blob_id, user_id, file_name, object_key, created_at) VALUES (?, ?, 'default', 'x.png', ?, '2025-01-01 00:00:00')",
    );
    const folder = app.db.query("INSERT INTO s3_folder_markers (user_id, object_key, created_at) VALUES ('default', ?, '2025-01-01 00:00:00')");
    keys.forEach((key, i) => {
      if (key.endsWith("/")) folder.run(key);
      else image.run(`k${i}`, blobId, key);
    });
  })();
}

const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const unescapeXml = (s: string) => s.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" })[e]!);
const tags = (xml: string, outer: string, inner: string) =>
  [...xml.matchAll(new RegExp(`<${outer}>(?:(?!</${outer}>).)*?<${inner}>([^<]*)</${inner}>`, "gs"))].map((m) => m[1]!);
const single = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];

interface Query {
  v2: boolean;
  prefix: string;
  delimiter: string;
  maxKeys: number;
  url: boolean;
  startAfter: string;
}

type Entry = { value: string; isPrefix: boolean };

/** S3 by brute force: keys under the prefix after the start, in byte order, each CommonPrefix once where its first key was. */
function model(keys: string[], q: Query): Entry[] {
  const cut = q.delimiter === "" || !q.startAfter.startsWith(q.prefix) ? -1 : q.startAfter.indexOf(q.delimiter, q.prefix.length);
  const startIsPrefix = cut >= 0 && cut + q.delimiter.length === q.startAfter.length;
  const out: Entry[] = [];
  for (const key of [...keys].sort(byUtf8)) {
    if (!key.startsWith(q.prefix) || (q.startAfter && byUtf8(key, q.startAfter) <= 0)) continue;
    if (startIsPrefix && key.startsWith(q.startAfter)) continue;
    const cut = q.delimiter ? key.indexOf(q.delimiter, q.prefix.length) : -1;
    const entry = cut < 0 ? { value: key, isPrefix: false } : { value: key.slice(0, cut + q.delimiter.length), isPrefix: true };
    if (!out.some((e) => e.isPrefix && entry.isPrefix && e.value === entry.value)) out.push(entry);
  }
  return out;
}

async function page(q: Query, next: string | undefined, sliceMs: number) {
  const params = new Map([
    ["prefix", q.prefix],
    ["delimiter", q.delimiter],
    ["max-keys", String(q.maxKeys)],
  ]);
  if (q.url) params.set("encoding-type", "url");
  if (q.v2) params.set("list-type", "2");
  // The first page starts after start-after (v1: the marker); the next ones from the answer's token / NextMarker.
  const marker = next ?? (q.startAfter || undefined);
  if (marker !== undefined) params.set(q.v2 ? (next === undefined ? "start-after" : "continuation-token") : "marker", marker);
  const req = { query: params, user: { id: "default" }, bucket: "kura" } as unknown as S3Request;
  const res = await (q.v2 ? listObjectsV2 : listObjectsV1)(app, req, sliceMs);
  const xml = await res.text();
  expect(res.status, xml).toBe(200);
  const decode = (s: string) => (q.url ? decodeURIComponent(unescapeXml(s)) : unescapeXml(s));
  const nextRaw = single(xml, q.v2 ? "NextContinuationToken" : "NextMarker");
  return {
    keys: tags(xml, "Contents", "Key").map(decode),
    prefixes: tags(xml, "CommonPrefixes", "Prefix").map(decode),
    truncated: single(xml, "IsTruncated") === "true",
    keyCount: single(xml, "KeyCount"),
    next: nextRaw === undefined ? undefined : q.v2 ? nextRaw : decode(nextRaw),
  };
}

async function expectListing(keys: string[], q: Query, sliceMs: number) {
  const expected = model(keys, q);
  const label = JSON.stringify({ keys: keys.length > 50 ? `${keys.length} keys` : keys, q, sliceMs });
  const pages = Math.max(1, Math.ceil(expected.length / q.maxKeys));
  let next: string | undefined;
  for (let i = 0; i < pages; i++) {
    const got = await page(q, next, sliceMs);
    const slice = expected.slice(i * q.maxKeys, (i + 1) * q.maxKeys);
    expect({ keys: got.keys, prefixes: got.prefixes, truncated: got.truncated }, `${label} page ${i}`).toEqual({
      keys: slice.filter((e) => !e.isPrefix).map((e) => e.value),
      prefixes: slice.filter((e) => e.isPrefix).map((e) => e.value),
      truncated: i < pages - 1,
    });
    if (q.v2) expect(got.keyCount, label).toBe(String(slice.length));
    if (got.truncated) {
      // v1 without a delimiter has no NextMarker: clients go on from the last key.
      next = got.next ?? got.keys.at(-1);
      expect(next, label).toBeDefined();
    }
  }
}

/** Characters whose UTF-8 order differs from UTF-16's (U+E000–U+FFFF vs astral), the largest code point, and `/` for runs. */
const CHARS = ["a", "b", "/", "/", "é", "图", "\uE000", "\uFFFF", "\u{10000}", "\u{1F600}", "\u{10FFFF}", "-"];
const keyArb = fc.array(fc.constantFrom(...CHARS), { minLength: 1, maxLength: 6 }).map((cs) => cs.join(""));
const queryArb = fc.record({
  v2: fc.boolean(),
  delimiter: fc.constantFrom("/", "/", "", "//", "图", "-", "\u{10FFFF}", "a/"),
  maxKeys: fc.integer({ min: 1, max: 6 }),
  url: fc.boolean(),
  prefix: fc.oneof(fc.constant(""), fc.constantFrom("a", "a/", "/", "\u{10FFFF}", "图/"), fc.nat()),
  startAfter: fc.oneof(fc.constant(""), fc.constant(""), fc.nat(), fc.constantFrom("a/", "b", "\uFFFF")),
});

test("property: every page of v1 and v2 with any delimiter equals the brute-force model, whether the walk yields or not", async () => {
  await fc.assert(
    fc.asyncProperty(fc.uniqueArray(keyArb, { minLength: 0, maxLength: 40 }), fc.array(queryArb, { minLength: 1, maxLength: 6 }), async (keys, queries) => {
      store(keys);
      for (const raw of queries) {
        // A prefix or start-after cut from a stored key, so prefixes of prefixes and keys equal to them occur.
        const cut = (n: number) => {
          const chars = Array.from(keys[n % Math.max(1, keys.length)] ?? "");
          return chars.slice(0, (n >> 3) % (chars.length + 1)).join("");
        };
        const q: Query = {
          ...raw,
          prefix: typeof raw.prefix === "number" ? cut(raw.prefix) : raw.prefix,
          startAfter: typeof raw.startAfter === "number" ? cut(raw.startAfter) : raw.startAfter,
        };
        for (const sliceMs of [10, 0]) await expectListing(keys, q, sliceMs);
      }
    }),
    fuzzParams(4),
  );
}, 120_000);

test("500 folders and 500 keys between them: one delimiter page holds max-keys entries, and the token goes on across the folders", async () => {
  const keys: string[] = [];
  for (let i = 0; i < 500; i++) {
    const n = String(i).padStart(3, "0");
    keys.push(`d${n}/a.png`, `d${n}/b/c.png`, `d${n}-flat.png`);
  }
  store(keys);
  for (const v2 of [false, true]) {
    for (const maxKeys of [1000, 7]) {
      const q = { v2, prefix: "", delimiter: "/", maxKeys, url: false, startAfter: "" };
      if (maxKeys === 1000) await expectListing(keys, q, 10);
      else {
        // A few pages only: 7 at a time would be 143 pages.
        const first = await page(q, undefined, 10);
        expect(first.prefixes.length + first.keys.length).toBe(7);
        // `-` sorts before `/`: each flat key comes right before its folder.
        expect(first.keys).toEqual(["d000-flat.png", "d001-flat.png", "d002-flat.png", "d003-flat.png"]);
        expect(first.prefixes).toEqual(["d000/", "d001/", "d002/"]);
        const second = await page(q, first.next, 10);
        expect([...second.keys, ...second.prefixes].sort(byUtf8)).toEqual([
          "d003/",
          "d004-flat.png",
          "d004/",
          "d005-flat.png",
          "d005/",
          "d006-flat.png",
          "d006/",
        ]);
      }
    }
  }
});
