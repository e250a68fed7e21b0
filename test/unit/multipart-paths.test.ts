/**
 * An upload form is read on one of two paths: a body with a declared length of at most 4 MiB in
 * memory, anything else streamed by busboy. Bun's native parser reads the in-memory body only
 * when plain-form.ts calls the form plain; every other form is read by busboy there too. On
 * random forms (fast-check, fixed seeds) both paths give the same fields, the same file (name,
 * size, bytes) or the same error. One property draws plain forms with hostile contents (names
 * and values of any Unicode, bytes that look like delimiters, invalid UTF-8), where the native
 * parser really runs; the other draws forms anything may be wrong with.
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseMultipart } from "../../src/images/upload/receive";
import { isPlainForm } from "../../src/images/upload/plain-form";

const tmp = mkdtempSync(join(tmpdir(), "kura-mp-paths-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const limits = { maxBytes: 64 * 1024, idleMs: 5000 };

/** What parseMultipart made of `body`: the fields, the file's name, size and bytes, or the error. */
async function outcome(body: Uint8Array, type: string, declared: boolean, cuts: number[] = []): Promise<string> {
  const headers: Record<string, string> = { "content-type": type };
  if (declared) headers["content-length"] = String(body.length);
  const request = new Request("http://kura.test/", {
    method: "POST",
    headers,
    body: new ReadableStream({
      start(c) {
        // The body in pieces cut at `cuts` (a network delivers it so), else whole.
        const at = [...new Set(cuts.map((n) => n % (body.length + 1)))].sort((x, y) => x - y);
        let from = 0;
        for (const to of [...at, body.length]) {
          if (to > from) c.enqueue(body.slice(from, to));
          from = Math.max(from, to);
        }
        c.close();
      },
    }),
    duplex: "half",
  } as RequestInit);
  try {
    const { file, fields } = await parseMultipart(request, tmp, limits, ["ttl", "album"]);
    const bytes = file ? (file.bytes ?? readFileSync(file.path as string)) : undefined;
    if (file?.path) rmSync(file.path);
    return JSON.stringify({ fields, name: file?.fileName, size: file?.size, bytes: bytes && Buffer.from(bytes).toString("base64") });
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

const encoder = new TextEncoder();
const concat = (...parts: (string | Uint8Array)[]) => Buffer.concat(parts.map((p) => (typeof p === "string" ? encoder.encode(p) : p)));

/** Text a plain form may quote: any Unicode but `"`, `\` and control characters. */
const quotable = fc.string({ unit: "binary", maxLength: 12 }).map((s) => s.replace(/["\\\u0000-\u001f\u007f]/g, "_"));
const fieldName = fc.oneof(fc.constantFrom("file", "ttl", "album", "other", ""), quotable);
/** Contents that come close to the boundary, as well as arbitrary bytes. */
const contents = (boundary: string) =>
  fc.oneof(
    fc.uint8Array({ maxLength: 40 }),
    fc
      .constantFrom("", "3600", "\r\n", `--${boundary}`, `\r\n--${boundary.slice(0, -1)}`, `\r\n-${boundary}`, `--${boundary}--`, "\xff\xfe", "\r\n\r\n")
      .map((s) => encoder.encode(s)),
    fc.constantFrom(Uint8Array.of(0xc3), Uint8Array.of(0xe6, 0xbc), Uint8Array.of(0xed, 0xa0, 0x80), Uint8Array.of(0xf4, 0x90, 0x80, 0x80)),
  );

const plainBoundary = fc.oneof(
  fc.constantFrom("kura", "----WebKitFormBoundary7MA4YWxkTrZu0gW", `${"-".repeat(26)}123`, "x".repeat(70)),
  fc.stringMatching(/^[A-Za-z0-9'+_\-.]{1,70}$/),
);

/** A form of the shape browsers, curl and HTTP libraries send, with random names and contents. */
const plainForm = plainBoundary.chain((boundary) =>
  fc
    .record({
      quote: fc.boolean(),
      space: fc.boolean(),
      parts: fc.array(
        fc.record({
          name: fieldName,
          fileName: fc.option(
            fc.oneof(fc.constantFrom("a.png", "", "照片 1.png", "%22.png", "dir/a.png", "..", ".", "a/", `${"长".repeat(6000)}.png`), quotable),
            { nil: undefined },
          ),
          fileType: fc.option(fc.constantFrom("image/png", "application/octet-stream", "IMAGE/JPEG", "text/plain"), { nil: undefined, freq: 2 }),
          /** Bytes that are not UTF-8 inside the quoted name. */
          rawName: fc.oneof(
            { arbitrary: fc.constant(undefined), weight: 20 },
            { arbitrary: fc.constantFrom(Uint8Array.of(0xff), Uint8Array.of(0xc3), Uint8Array.of(0xed, 0xa0, 0x80)), weight: 1 },
          ),
          headerCase: fc.constantFrom("Content-Disposition", "content-disposition"),
          typeFirst: fc.boolean(),
          value: contents(boundary),
        }),
        { maxLength: 5 },
      ),
      // An epilogue that repeats a part: Bun reads on past the close delimiter, busboy stops.
      end: fc.constantFrom(
        "",
        "\r\n",
        "\r\n",
        "\r\n",
        "\r\n",
        "\r\nepilogue",
        "\n",
        `\r\n--${boundary}\r\nContent-Disposition: form-data; name="album"\r\n\r\nx\r\n--${boundary}--\r\n`,
      ),
    })
    .map(({ quote, space, parts, end }) => {
      const sep = space ? "; " : ";";
      const pieces: (string | Uint8Array)[] = [];
      for (const p of parts) {
        const disposition = `${p.headerCase}: form-data${sep}name="${p.name}`;
        const rest = `"${p.fileName === undefined ? "" : `${sep}filename="${p.fileName}"`}`;
        const type = p.fileType ? `Content-Type: ${p.fileType}` : undefined;
        const lines = (first: string | Uint8Array) => (type ? (p.typeFirst ? [`${type}\r\n`, first] : [first, `\r\n${type}`]) : [first]);
        const named = p.rawName ? concat(disposition, p.rawName, rest) : `${disposition}${rest}`;
        pieces.push(`--${boundary}\r\n`, ...lines(named), "\r\n\r\n", p.value, "\r\n");
      }
      pieces.push(`--${boundary}--${end}`);
      return { body: concat(...pieces), type: `multipart/form-data; boundary=${quote ? `"${boundary}"` : boundary}` };
    }),
);

/** Header text with the characters that trip parsers. */
const oddText = fc
  .array(fc.constantFrom("a", ".", " ", '"', "\\", ";", "=", "\0", "\t", "\x7f", "é", "漢", "%", "*", "'", "\x01", "\r", "\n"), { maxLength: 10 })
  .map((a) => a.join(""));

/** A form anything may be wrong with: preambles, LF line breaks, `filename*=`, odd headers and boundaries, cut-off ends. */
const anyForm = fc
  .record({
    boundary: fc.oneof(
      fc.constantFrom("b", "kura", "x".repeat(70), "x".repeat(71), "x".repeat(200), "a b", "a/b"),
      fc.stringMatching(/^[A-Za-z0-9'()+_,\-./:=? ]{1,20}$/),
    ),
    typeStyle: fc.constantFrom("plain", "quoted", "upper", "charset", "nospace"),
    preamble: fc.constantFrom("", "", "preamble\r\n", "\r\n"),
    parts: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom("file", "ttl", "album", "other"), oddText),
        quoteName: fc.boolean(),
        fileName: fc.oneof(fc.constantFrom("a.png", "", "x y.png"), oddText),
        fileStyle: fc.constantFrom("plain", "plain", "star", "both", "none"),
        type: fc.constantFrom(undefined, "image/png", "text/plain; charset=latin1", "text/plain; charset=utf-8"),
        extra: fc.constantFrom(
          undefined,
          "X-Junk: 1",
          `x-long: ${"a".repeat(20000)}`,
          "bad header",
          'content-disposition: form-data; name="ttl"',
          "Content-Type: image/gif",
        ),
        value: fc.oneof(
          fc.uint8Array({ maxLength: 30 }),
          oddText.map((s) => encoder.encode(s)),
        ),
        eol: fc.constantFrom("\r\n", "\r\n", "\n"),
      }),
      { maxLength: 4 },
    ),
    close: fc.constantFrom("--\r\n", "--", "", "--\r\nepilogue", "\r\n"),
  })
  .map((f) => {
    const pieces: (string | Uint8Array)[] = [f.preamble];
    for (const p of f.parts) {
      let disposition = `Content-Disposition: form-data; name=${p.quoteName ? `"${p.name}"` : p.name}`;
      if (p.fileStyle === "plain" || p.fileStyle === "both") disposition += `; filename="${p.fileName}"`;
      if (p.fileStyle === "star" || p.fileStyle === "both") disposition += `; filename*=UTF-8''${encodeURIComponent(p.fileName)}`;
      const headers = [disposition, ...(p.type ? [`Content-Type: ${p.type}`] : []), ...(p.extra ? [p.extra] : [])];
      pieces.push(`--${f.boundary}${p.eol}${headers.join(p.eol)}${p.eol}${p.eol}`, p.value, "\r\n");
    }
    pieces.push(`--${f.boundary}${f.close}`);
    const b = f.typeStyle === "quoted" ? `"${f.boundary}"` : f.boundary;
    const type = {
      plain: `multipart/form-data; boundary=${b}`,
      quoted: `multipart/form-data; boundary=${b}`,
      upper: `Multipart/Form-Data; Boundary=${b}`,
      charset: `multipart/form-data; charset=utf-8; boundary=${b}`,
      nospace: `multipart/form-data;boundary=${b}`,
    }[f.typeStyle];
    return { body: concat(...pieces), type };
  });

describe("both multipart paths read a form the same way", () => {
  test("plain forms with any names and contents: the native parser reads what busboy reads", async () => {
    let plain = 0;
    await fc.assert(
      fc.asyncProperty(plainForm, fc.array(fc.nat(), { maxLength: 4 }), async ({ body, type }, cuts) => {
        if (isPlainForm(body, type)) plain++;
        const streamed = await outcome(body, type, false);
        expect(await outcome(body, type, true)).toBe(streamed);
        // The in-memory path gathers a body that arrives in pieces into the same bytes.
        expect(await outcome(body, type, true, cuts)).toBe(streamed);
      }),
      { seed: 20261128, numRuns: 1500 },
    );
    // The generator must really exercise the native path: a stricter recognizer would pass
    // the equality above by sending everything to busboy.
    expect(plain).toBeGreaterThan(450);
  });

  test("any form: the same fields, file or error on both paths", async () => {
    await fc.assert(
      fc.asyncProperty(anyForm, async ({ body, type }) => {
        expect(await outcome(body, type, true)).toBe(await outcome(body, type, false));
      }),
      { seed: 1128, numRuns: 1500 },
    );
  });

  test("the forms real clients send are plain: the fast path stays in use", () => {
    const png = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
    const real = [
      // Chromium and Firefox
      { boundary: "----WebKitFormBoundaryx8Gs1AcPpSUvw2Gt", type: (b: string) => `multipart/form-data; boundary=${b}` },
      // curl -F
      { boundary: "------------------------d74496d66958873e", type: (b: string) => `multipart/form-data; boundary=${b}` },
      // .NET HttpClient (ShareX) quotes the boundary
      { boundary: "5f2d3c9a-1b7e-4f0a-9c1d-2e3f4a5b6c7d", type: (b: string) => `multipart/form-data; boundary="${b}"` },
      // form-data (PicGo)
      { boundary: "--------------------------515890814546601021194782", type: (b: string) => `multipart/form-data; boundary=${b}` },
    ];
    for (const { boundary, type } of real) {
      const body = concat(
        `--${boundary}\r\nContent-Disposition: form-data; name="ttl"\r\n\r\n3600\r\n`,
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="截图 2026.png"\r\nContent-Type: image/png\r\n\r\n`,
        png,
        `\r\n--${boundary}--\r\n`,
      );
      expect(isPlainForm(body, type(boundary))).toBe(true);
    }
  });
});
