/**
 * The compat APIs' request inputs, rule by rule (each table row names its rule):
 *
 * - Lsky (src/compat/lsky-page.ts): `page` as Laravel's resolveCurrentPage reads it
 *   (FILTER_VALIDATE_INT, at least 1, else 1), `album_id` as PHP's `(int)` (non-zero asks for an
 *   album), and LengthAwarePaginator::toArray: first/last/prev/next URLs, `from`/`to`, the
 *   `links` with Lsky's zh_CN arrows, page URLs that keep the query (rawurlencode, the last of
 *   repeated names where the first stood).
 * - Chevereto (src/compat/chevereto-input.ts): `key`, `format`, `expiration` and the image from
 *   the query and a multipart or urlencoded form, the form over the query (PHP's $_REQUEST);
 *   the image as `$FILES['source'] ?? $REQUEST['source'] ?? $REQUEST['image']`, any `image` asking
 *   for ImgBB's answer; `source` as a file, an http(s) URL (the SSRF-safe import) or base64 text
 *   (a `data:` prefix dropped) under the size cap; Chevereto's refusals with their codes.
 *
 * The black-box uploads are in test/clients/lsky.test.ts and test/clients/chevereto.test.ts.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cheveretoSource, discardInput, readCheveretoInput, type CheveretoInput } from "../../src/compat/chevereto-input";
import { laravelPage, lskyPage, pageWindow, phpIntIsNonZero } from "../../src/compat/lsky-page";
import type { AppContext } from "../../src/context";

// --- Lsky ---------------------------------------------------------------------------------------

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("Lsky `page` (FILTER_VALIDATE_INT, then at least 1)", () => {
  test.each([
    ["a multi-digit page", "12", 12],
    ["page 1", "1", 1],
    ["PHP's blanks (space, tab, CR, LF, VT) around it", " \t\r\n\v12 \v\n", 12],
    ["a plus sign", "+7", 7],
    ["a plus sign inside blanks", " +7 ", 7],
    ["a minus sign: a valid integer below 1", "-7", 1],
    ["zero", "0", 1],
    ["signed zeros", "+0", 1],
    ["leading zeros are not an integer", "007", 1],
    ["a blank inside", "1 2", 1],
    ["two signs", "+-3", 1],
    ["a decimal", "2.0", 1],
    ["hexadecimal", "0x10", 1],
    ["an exponent", "1e3", 1],
    ["only blanks", "   ", 1],
    ["a form feed is no blank to PHP", "\f2", 1],
    ["nor a no-break space", "\u00a02", 1],
    ["nor an ideographic space", "2\u3000", 1],
    ["the largest exact integer", "9007199254740991", 9007199254740991],
    ["past the exact integers", "9007199254740993", 1],
  ] as const)("%s: %p is page %p", (_rule, text, page) => {
    expect(laravelPage(text)).toBe(page);
  });

  test("absent is page 1", () => {
    expect(laravelPage(undefined)).toBe(1);
  });

  /** PHP's FILTER_VALIDATE_INT character by character (ext/filter/logical_filters.c), then resolveCurrentPage's `>= 1`. */
  function referencePage(value: string): number {
    const blank = (c: string | undefined) => c !== undefined && " \t\r\n\v".includes(c);
    let from = 0;
    let to = value.length;
    while (from < to && blank(value[from])) from++;
    while (to > from && blank(value[to - 1])) to--;
    let s = value.slice(from, to);
    let sign = 1;
    if (s[0] === "+" || s[0] === "-") {
      sign = s[0] === "-" ? -1 : 1;
      s = s.slice(1);
    }
    if (s === "0") return 1;
    if (!s || s[0]! < "1" || s[0]! > "9" || [...s].some((c) => c < "0" || c > "9")) return 1;
    const n = sign * Number(s);
    return Math.max(n, 1);
  }

  test("agrees with FILTER_VALIDATE_INT on random short texts of signs, digits, PHP's blanks and stray characters", () => {
    // Short enough to stay below 2^53 (where Kura stops; PHP goes on to 2^63). \f and NBSP are
    // blanks to JavaScript's \s and trim(), not to PHP.
    const chars = fc.constantFrom(" ", "\t", "\n", "\r", "\v", "\f", "\u00a0", "+", "-", "0", "1", "2", "9", "a", ".", "e", "x");
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 15 }), (parts) => {
        const text = parts.join("");
        expect([text, laravelPage(text)]).toEqual([text, referencePage(text)]);
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });
});

describe("Lsky `album_id` as PHP's (int): non-zero asks for an album", () => {
  test.each([
    ["absent", undefined, false],
    ["empty", "", false],
    ["zero", "0", false],
    ["zeros", "000", false],
    ["a signed zero", "-0", false],
    ["a fraction below 1", "0.5", false],
    ["hexadecimal is 0 to (int)", "0x1A", false],
    ["letters first", "abc1", false],
    ["a letter first", "x1", false],
    ["two signs", "+-1", false],
    ["one", "1", true],
    ["leading zeros then a digit", "007", true],
    ["a plus sign", "+1", true],
    ["a minus sign", "-1", true],
    ["a leading blank", " 2", true],
    ["leading tab and newline", "\t\n3", true],
    ["digits then letters", "12abc", true],
  ] as const)("%s: %p → %p", (_rule, value, nonZero) => {
    expect(phpIntIsNonZero(value)).toBe(nonZero);
  });
});

describe("Lsky's paginator (LengthAwarePaginator::toArray)", () => {
  const PATH = "http://x/api/v1/images";
  const url = (n: number) => `${PATH}?page=${n}`;
  const arrows = (prev: string | null, next: string | null) => ({
    prev: { url: prev, label: "&laquo; 上一页", active: false },
    next: { url: next, label: "下一页 &raquo;", active: false },
  });
  const link = (n: number, current: number) => ({ url: url(n), label: String(n), active: n === current });

  test("a middle page: both arrows, from/to counted from the page, last page rounded up", () => {
    const items = range(41, 80);
    const { prev, next } = arrows(url(1), url(3));
    expect(lskyPage(items, 100, 2, 40, PATH)).toStrictEqual({
      current_page: 2,
      data: items,
      first_page_url: url(1),
      from: 41,
      last_page: 3,
      last_page_url: url(3),
      links: [prev, link(1, 2), link(2, 2), link(3, 2), next],
      next_page_url: url(3),
      path: PATH,
      per_page: 40,
      prev_page_url: url(1),
      to: 80,
      total: 100,
    });
  });

  test("the first page: no previous page", () => {
    const page = lskyPage(["a"], 41, 1, 40, PATH);
    expect([page.prev_page_url, page.next_page_url, page.from, page.to, page.last_page]).toEqual([null, url(2), 1, 1, 2]);
    expect(page.links[0]).toStrictEqual(arrows(null, null).prev);
  });

  test("the last page, part full: no next page, `to` is the last item", () => {
    const page = lskyPage(range(81, 100), 100, 3, 40, PATH);
    expect([page.prev_page_url, page.next_page_url, page.from, page.to]).toEqual([url(2), null, 81, 100]);
    expect(page.links.at(-1)).toStrictEqual(arrows(null, null).next);
  });

  test("nothing at all: one page, no arrows' URLs, from and to null", () => {
    const { prev, next } = arrows(null, null);
    expect(lskyPage([], 0, 1, 40, PATH)).toStrictEqual({
      current_page: 1,
      data: [],
      first_page_url: url(1),
      from: null,
      last_page: 1,
      last_page_url: url(1),
      links: [prev, link(1, 1), next],
      next_page_url: null,
      path: PATH,
      per_page: 40,
      prev_page_url: null,
      to: null,
      total: 0,
    });
  });

  test("a page past the last: empty, the previous page is the one before it, no link active", () => {
    const page = lskyPage([], 100, 5, 40, PATH);
    expect([page.prev_page_url, page.next_page_url, page.from, page.to, page.last_page]).toEqual([url(4), null, null, null, 3]);
    expect(page.links.filter((l) => l.active)).toEqual([]);
  });

  test.each([
    ["rawurlencode escapes !'()* too (RFC 3986), keeps -_.~", [["q", "it's (a)*!-_.~"]], "q=it%27s%20%28a%29%2A%21-_.~&page=2"],
    ["names and UTF-8 values are encoded", [["x y", "ä/?&="]], "x%20y=%C3%A4%2F%3F%26%3D&page=2"],
    [
      "the last of a repeated name, where the first stood",
      [
        ["a", "1"],
        ["b", "2"],
        ["a", "3"],
      ],
      "a=3&b=2&page=2",
    ],
    ["no query: only the page", [], "page=2"],
  ] as const)("page URLs keep the query: %s", (_rule, query, expected) => {
    const page = lskyPage(["item"], 100, 1, 40, PATH, query as unknown as [string, string][]);
    expect(page.next_page_url).toBe(`${PATH}?${expected}`);
  });

  test.each([
    ["14 pages, the fewest with gaps: near the start", 1, 14, [...range(1, 10), null, 13, 14]],
    ["14 pages: the 7th is still near the start", 7, 14, [...range(1, 10), null, 13, 14]],
    ["14 pages: the 8th is near the end", 8, 14, [1, 2, null, ...range(5, 14)]],
    ["13 pages: every page", 13, 13, range(1, 13)],
  ] as const)("Laravel's UrlWindow: %s", (_rule, current, last, window) => {
    expect(pageWindow(current, last)).toEqual([...window]);
  });
});

// --- Chevereto ----------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "kura-chevereto-input-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MB = 1024 * 1024;
/** What the reader and the source look at: the size cap (1 MB), the idle deadline, tmp, the import's allow list. */
const app = {
  settings: { get: () => ({ max_upload_mb: 1, upload_idle_timeout_seconds: 30 }) },
  paths: { tmp: dir },
  bootstrap: { importAllow: { has: () => false, entries: [] } },
} as unknown as AppContext;

const BASE = "http://kura.test/api/1/upload";
const get = (query = "", headers: Record<string, string> = {}) => new Request(`${BASE}${query}`, { headers });
const urlencoded = (query: string, body: string, type = "application/x-www-form-urlencoded") =>
  new Request(`${BASE}${query}`, { method: "POST", body, headers: { "content-type": type } });
/** A multipart form of text fields and files (`[name, File]`), in order. */
function multipart(query: string, parts: [string, string | File][]): Request {
  const form = new FormData();
  for (const [name, value] of parts) form.append(name, value);
  return new Request(`${BASE}${query}`, { method: "POST", body: form });
}
const png = (bytes: number[], name = "a.png") => new File([Uint8Array.from(bytes)], name, { type: "image/png" });

/** The input as plain data: the fields, the ImgBB flag, and the file's bytes (read back from its temp file, or from memory). */
function summary(input: CheveretoInput) {
  const file = input.file;
  const bytes = file ? (file.path ? readFileSync(file.path) : Buffer.from(file.bytes!)) : undefined;
  return {
    fields: input.fields,
    imgbb: input.imgbb,
    file: file ? { size: file.size, fileName: file.fileName, hex: bytes!.toString("hex") } : null,
  };
}
async function read(request: Request) {
  const told: [string, string][] = [];
  const input = await readCheveretoInput(app, request, (name, value) => void told.push([name, value]));
  const got = { ...summary(input), told };
  await discardInput(input);
  return got;
}
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => "no refusal",
    (err: { status?: number; code?: number; problem?: string; message: string; name: string }) => ({
      name: err.name,
      status: err.status,
      code: err.code,
      problem: err.problem,
      message: err.message,
    }),
  );

/** Base64 longer than the 8 KiB a urlencoded source stays text for (decoded to a temp file), and its bytes. */
const LONG_BYTES = Buffer.from(Array.from({ length: 9000 }, (_, i) => (i * 13) % 256));
const LONG = encodeURIComponent(LONG_BYTES.toString("base64"));
/** Base64 over the 1 KiB of an ordinary multipart text field: `source` and `image` may be that long. */
const TEXT_4K = "QUJD".repeat(1024);

afterEach(() => {
  // Nothing the reader wrote outlives the test (the summaries above removed what was returned);
  // cleared after the check, so one leftover fails one test only.
  const left = readdirSync(dir);
  for (const name of left) rmSync(join(dir, name), { force: true });
  expect(left).toEqual([]);
});

describe("Chevereto: the parameters (form over query, as $_REQUEST)", () => {
  const none = { file: null, told: [] };
  test.each([
    [
      "the query alone: key, format, expiration and source are read, other names are not",
      get("?key=k&format=txt&expiration=PT5M&source=http%3A%2F%2Fa%2Fb.png&title=t&album_id=1&nsfw=1"),
      { fields: { key: "k", format: "txt", expiration: "PT5M", source: "http://a/b.png" }, imgbb: false, ...none },
    ],
    [
      "no body: the query alone, whatever the content type says",
      get("?key=k", { "content-type": "text/plain" }),
      { fields: { key: "k" }, imgbb: false, ...none },
    ],
    ["no parameters at all", get(), { fields: {}, imgbb: false, ...none }],
    ["a query image is the source, answered in ImgBB's shape", get("?image=QUJD"), { fields: { source: "QUJD" }, imgbb: true, ...none }],
    ["a query source wins over a query image (still ImgBB's shape)", get("?image=I&source=S"), { fields: { source: "S" }, imgbb: true, ...none }],
    [
      "urlencoded: the form's key and source win over the query's; format stays from the query",
      urlencoded("?key=q&format=json&source=Q", "key=f&source=F"),
      { fields: { key: "f", format: "json", source: "F" }, imgbb: false, file: null, told: [["key", "f"]] },
    ],
    ["urlencoded: a query source wins over a form image", urlencoded("?source=Q", "image=I"), { fields: { source: "Q" }, imgbb: true, ...none }],
    ["urlencoded: an image alone is the source", urlencoded("", "image=I"), { fields: { source: "I" }, imgbb: true, ...none }],
    ["urlencoded: a form image wins over a query image", urlencoded("?image=QI", "image=I"), { fields: { source: "I" }, imgbb: true, ...none }],
    [
      "urlencoded: an image then a source, the source wins but the answer is ImgBB's",
      urlencoded("", "image=I&source=S"),
      { fields: { source: "S" }, imgbb: true, ...none },
    ],
    [
      "urlencoded: the content type in any case, with parameters",
      urlencoded("", "key=k", "Application/X-WWW-Form-Urlencoded; charset=UTF-8"),
      { fields: { key: "k" }, imgbb: false, file: null, told: [["key", "k"]] },
    ],
    [
      "multipart: a file part named source is the image; onField hears the text fields",
      multipart("", [
        ["key", "k"],
        ["source", png([1, 2, 3])],
      ]),
      { fields: { key: "k" }, imgbb: false, file: { size: 3, fileName: "a.png", hex: "010203" }, told: [["key", "k"]] },
    ],
    [
      "multipart: a source file wins over a source text in the form and in the query",
      multipart("?source=Q", [
        ["source", "T"],
        ["source", png([4, 5])],
      ]),
      { fields: {}, imgbb: false, file: { size: 2, fileName: "a.png", hex: "0405" }, told: [["source", "T"]] },
    ],
    ["multipart: a file part named image is not read", multipart("", [["image", png([6])]]), { fields: {}, imgbb: false, ...none }],
    ["multipart: an image text is the source", multipart("", [["image", "I"]]), { fields: { source: "I" }, imgbb: true, file: null, told: [["image", "I"]] }],
    [
      "multipart: a query source wins over a form image text",
      multipart("?source=Q", [["image", "I"]]),
      { fields: { source: "Q" }, imgbb: true, file: null, told: [["image", "I"]] },
    ],
    [
      "multipart: source may be longer than an ordinary field's 1 KiB (base64)",
      multipart("", [["source", TEXT_4K]]),
      { fields: { source: TEXT_4K }, imgbb: false, file: null, told: [["source", TEXT_4K]] },
    ],
    ["multipart: so may image", multipart("", [["image", TEXT_4K]]), { fields: { source: TEXT_4K }, imgbb: true, file: null, told: [["image", TEXT_4K]] }],
  ] as const)("%s", async (_rule, request, expected) => {
    expect(await read(request)).toStrictEqual(expected as unknown as Awaited<ReturnType<typeof read>>);
  });

  test("a long urlencoded image (decoded to a temp file) is the image when nothing else is", async () => {
    const input = await readCheveretoInput(app, urlencoded("", `key=k&image=${LONG}`));
    expect(summary(input)).toStrictEqual({
      fields: { key: "k" },
      imgbb: true,
      file: { size: LONG_BYTES.length, fileName: "image", hex: LONG_BYTES.toString("hex") },
    });
    await discardInput(input);
  });

  test("a long urlencoded image loses to a query source, and its temp file is removed at once", async () => {
    const input = await readCheveretoInput(app, urlencoded("?source=Q", `image=${LONG}`));
    expect(summary(input)).toStrictEqual({ fields: { source: "Q" }, imgbb: true, file: null });
    expect(readdirSync(dir)).toEqual([]);
  });

  test.each([
    ["text/plain", "text/plain"],
    ["JSON", "application/json"],
    ["a multipart type only at the end", "text/plain; x=multipart/form-data"],
    ["a urlencoded type only at the end", "text/plain; x=application/x-www-form-urlencoded"],
  ])("any other body is refused (%s)", async (_rule, type) => {
    expect(await refusal(readCheveretoInput(app, urlencoded("?key=k", "key=k", type)))).toEqual({
      name: "ApiError",
      status: 400,
      code: undefined,
      problem: undefined,
      message: "请求必须是 multipart/form-data 或 application/x-www-form-urlencoded",
    });
  });

  test("a body without a content type is refused the same way", async () => {
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("key=k"));
        controller.close();
      },
    });
    const request = new Request(BASE, { method: "POST", body, duplex: "half" } as RequestInit);
    expect(await refusal(readCheveretoInput(app, request))).toMatchObject({
      status: 400,
      message: "请求必须是 multipart/form-data 或 application/x-www-form-urlencoded",
    });
  });

  test("throwing from onField ends the read; no file part is kept", async () => {
    const request = multipart("", [
      ["key", "bad"],
      ["source", png(range(0, 200))],
    ]);
    const failed = readCheveretoInput(app, request, (name) => {
      if (name === "key") throw new Error("wrong key");
    });
    expect(await refusal(failed)).toMatchObject({ message: "wrong key" });
  });

  /**
   * The property: Chevereto's `$FILES['source'] ?? $REQUEST['source'] ?? $REQUEST['image']`, where
   * $REQUEST is the form over the query and the last value of a name wins, against the reader,
   * on random mixes of query parameters, form kinds, field orders and a source file.
   */
  test("on random requests the image, the fields and the ImgBB flag are Chevereto's", async () => {
    const name = fc.constantFrom("key", "format", "source", "image", "title");
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(name, { maxLength: 5 }),
        fc.constantFrom("none", "urlencoded", "multipart"),
        fc.array(name, { maxLength: 6 }),
        fc.boolean(),
        async (queryNames, kind, formNames, withFile) => {
          const query = queryNames.map((n): [string, string] => [n, `q-${n}`]);
          const form = kind === "none" ? [] : formNames.map((n, i): [string, string] => [n, `f${i}-${n}`]);
          const file = kind === "multipart" && withFile;
          const search = query.length ? `?${new URLSearchParams(query)}` : "";
          const request =
            kind === "none"
              ? get(search)
              : kind === "urlencoded"
                ? urlencoded(search, new URLSearchParams(form).toString())
                : multipart(search, [...form, ...(file ? [["source", png([9, 9])] as [string, File]] : [])]);
          const got = await read(request);
          // $REQUEST: the query, then the form's values over it, the last of a name winning.
          const phpRequest = new Map<string, string>([...query, ...form]);
          const known = ["key", "format", "expiration"];
          const fields: Record<string, string> = Object.fromEntries([...phpRequest].filter(([n]) => known.includes(n)));
          const source = file ? undefined : (phpRequest.get("source") ?? phpRequest.get("image"));
          if (source !== undefined) fields.source = source;
          expect({ fields: got.fields, imgbb: got.imgbb, file: got.file?.hex ?? null }).toStrictEqual({
            fields,
            imgbb: phpRequest.has("image"),
            file: file ? "0909" : null,
          });
        },
      ),
      { seed: 20261129, numRuns: 300 },
    );
  });
});

describe("Chevereto: the source as an image", () => {
  const text = (source: string | undefined): CheveretoInput => ({ fields: source === undefined ? {} : { source }, imgbb: false });
  const decoded = (hex: string) => ({ bytes: Buffer.from(hex, "hex"), size: hex.length / 2, fileName: "image" });

  test("a file is taken as received", async () => {
    const file = { bytes: Buffer.from([1]), size: 1, fileName: "a.png" };
    expect(await cheveretoSource(app, { fields: { source: "QUJD" }, file, imgbb: false })).toBe(file);
  });

  test.each([
    ["base64 text", "QUJD", "414243"],
    ["blanks around it are trimmed", "  QUJD\r\n", "414243"],
    ["line breaks inside are allowed", "QUJD\nQUJD", "414243414243"],
    ["a data: URL's prefix is dropped", "data:image/png;base64,QUJD", "414243"],
    ["the prefix in any case", "DATA:IMAGE/PNG;BASE64,QUJD", "414243"],
    ["padding", "QQ==", "41"],
  ])("decoded: %s", async (_rule, source, hex) => {
    expect(await cheveretoSource(app, text(source))).toStrictEqual(decoded(hex));
  });

  const EMPTY = { name: "CheveretoRefusal", status: undefined, code: 130, problem: "malformed", message: "缺少 source：需要图片文件、base64 数据或图片 URL" };
  const NOT_BASE64 = { name: "CheveretoRefusal", status: undefined, code: 120, problem: "malformed", message: "source 不是有效的 base64 数据或图片 URL" };
  const NOT_PUBLIC = { name: "ApiError", status: 400, code: undefined, problem: undefined, message: "URL 指向的不是公网地址，已拒绝" };
  test.each([
    ["no source: Chevereto's empty upload source (130)", undefined, EMPTY],
    ["an empty source is the same", "", EMPTY],
    ["a blank source is the same", " \t\n", EMPTY],
    ["an http URL is imported (a loopback one refused by the SSRF check)", "http://127.0.0.1/a.png", NOT_PUBLIC],
    ["an https URL too", "https://127.0.0.1/a.png", NOT_PUBLIC],
    ["the scheme in any case", "HTTPS://127.0.0.1/a.png", NOT_PUBLIC],
    ["blanks around a URL are trimmed", "  http://127.0.0.1/a.png\n", NOT_PUBLIC],
    ["a URL only at the start: otherwise base64 rules (120)", "xhttp://127.0.0.1/a.png", NOT_BASE64],
    ["another scheme is not a URL", "ftp://127.0.0.1/a.png", NOT_BASE64],
    ["a length no whole groups make", "QUJ", NOT_BASE64],
  ])("refused: %s", async (_rule, source, expected) => {
    expect(await refusal(cheveretoSource(app, text(source)))).toStrictEqual(expected);
  });

  test("the size cap: exactly max_upload_mb decoded is accepted, one byte more refused", async () => {
    const exact = Buffer.alloc(MB, 7);
    const got = await cheveretoSource(app, text(exact.toString("base64")));
    expect([got.size, got.fileName, Buffer.compare(got.bytes!, exact)]).toEqual([MB, "image", 0]);
    expect(await refusal(cheveretoSource(app, text(Buffer.alloc(MB + 1, 7).toString("base64"))))).toStrictEqual({
      name: "Invalid",
      status: undefined,
      code: undefined,
      problem: "too_large",
      message: "图片超过大小上限（1 MB）",
    });
  });
});

describe("Chevereto: discarding an unused input", () => {
  test("a temp file is removed", async () => {
    const path = join(dir, "unused-upload");
    writeFileSync(path, "x");
    await discardInput({ fields: {}, file: { path, size: 1, fileName: "a" }, imgbb: false });
    expect(existsSync(path)).toBe(false);
  });

  test.each([
    ["no input", undefined],
    ["no file", { fields: {}, imgbb: false }],
    ["a file in memory", { fields: {}, file: { bytes: Buffer.from([1]), size: 1, fileName: "a" }, imgbb: false }],
    ["a temp file already gone", { fields: {}, file: { path: join(dir, "gone"), size: 1, fileName: "a" }, imgbb: false }],
  ] as const)("nothing to remove is fine: %s", async (_rule, input) => {
    expect(await discardInput(input as CheveretoInput | undefined)).toBeUndefined();
  });
});
