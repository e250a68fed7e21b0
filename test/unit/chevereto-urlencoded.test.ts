/**
 * Chevereto's urlencoded upload form read as it streams in (src/compat/chevereto-urlencoded.ts),
 * rule by rule and as a property against URLSearchParams reading the whole body: `key`, `format`
 * and `expiration` kept (the last value wins, each told to `onField` as it completes, 1 KiB at
 * most), every other field skipped; the image read as `source ?? image` with the last value of a
 * name winning, kept as text up to 8 KiB and past that decoded from base64 into a temp file (a
 * `data:` prefix and leading blanks dropped); the size caps; no temp file left by a refusal or a
 * replaced value. Black-box uploads through it are in clients/chevereto.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readUrlencodedForm, SOURCE_TEXT_BYTES, type SourceName, type UrlencodedForm } from "../../src/compat/chevereto-urlencoded";
import { fuzzParams } from "../fuzz/fuzz-support";

const dir = mkdtempSync(join(tmpdir(), "kura-chevereto-form-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MAX_BYTES = 64 * 1024;
const limits = { maxBytes: MAX_BYTES, idleMs: 10_000 };

/** A request whose body arrives in `chunks` (strings are latin1/ASCII here: urlencoded text). */
function request(chunks: (string | Uint8Array)[], headers: Record<string, string> = {}): Request {
  const parts = chunks.map((c) => (typeof c === "string" ? Buffer.from(c, "latin1") : c));
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < parts.length) controller.enqueue(parts[i++]!);
      else controller.close();
    },
  });
  return new Request("http://kura.test/api/1/upload", {
    method: "POST",
    body,
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    duplex: "half",
  } as RequestInit);
}

/** What a read gave, the file's bytes read back (and removed), plus every onField call in order. */
async function read(chunks: (string | Uint8Array)[], headers: Record<string, string> = {}) {
  const told: [string, string][] = [];
  const form = await readUrlencodedForm(request(chunks, headers), dir, limits, (name, value) => void told.push([name, value]));
  return { ...summary(form), told };
}
function summary(form: UrlencodedForm) {
  // A decoded image is always a temp file, never bytes in memory.
  const path = form.file?.path;
  expect(form.file === undefined || path !== undefined).toBe(true);
  const file = path ? readFileSync(path) : undefined;
  if (path) {
    expect([form.file!.size, form.file!.fileName]).toEqual([file!.length, "image"]);
    rmSync(path);
  }
  return { fields: form.fields, from: form.from, imageSent: form.imageSent ?? false, file: file?.toString("hex") };
}
const refusal = (chunks: (string | Uint8Array)[], headers: Record<string, string> = {}) =>
  readUrlencodedForm(request(chunks, headers), dir, limits, () => {}).then(
    () => "ok",
    (err: Error) => err.message,
  );
const tempFiles = () => readdirSync(dir);

/** Base64 text longer than SOURCE_TEXT_BYTES, and the bytes it stands for. */
const bytes = Buffer.from(Array.from({ length: 9000 }, (_, i) => (i * 7) % 256));
const LONG = bytes.toString("base64");
/** LONG as a form value: `+`, `/` and `=` percent-encoded (a bare `+` would be a space). */
const LONG_VALUE = encodeURIComponent(LONG);
const enc = encodeURIComponent;

describe("the text fields", () => {
  test("key, format and expiration are kept, the last value of each winning; onField hears each as it completes", async () => {
    const got = await read(["key=a&format=json&key=b&expiration=PT5M&title=x&album_id=3"]);
    expect(got.fields).toEqual({ key: "b", format: "json", expiration: "PT5M" });
    expect(got.told).toEqual([
      ["key", "a"],
      ["format", "json"],
      ["key", "b"],
      ["expiration", "PT5M"],
    ]);
  });

  test("values are percent- and plus-decoded as UTF-8, whatever the chunk boundaries", async () => {
    const body = `key=${enc("密钥 +/=")}&format=a+b`;
    for (let cut = 0; cut <= body.length; cut++) {
      expect((await read([body.slice(0, cut), body.slice(cut)])).fields).toEqual({ key: "密钥 +/=", format: "a b" });
    }
  });

  test("a text field of up to 1 KiB is kept; longer is refused", async () => {
    expect((await read([`key=${"k".repeat(1024)}`])).fields.key).toHaveLength(1024);
    expect(await refusal([`key=${"k".repeat(1025)}`])).toBe("表单字段 key 超过 1 KiB");
    expect(await refusal([`format=${"é".repeat(513)}`.replace(/é/g, "%C3%A9")])).toBe("表单字段 format 超过 1 KiB");
  });

  test("a field whose name is over 64 bytes is skipped, even one that starts or ends like a kept name", async () => {
    expect((await read([`${"x".repeat(62)}key=1&key${"x".repeat(62)}=2&format=3`])).fields).toEqual({ format: "3" });
  });
});

describe("the image", () => {
  test("a short source is text (an image URL), under its own name", async () => {
    const got = await read([`source=${enc("https://example.com/a.png?x=1&y=2")}&key=k`]);
    expect(got).toMatchObject({ fields: { source: "https://example.com/a.png?x=1&y=2", key: "k" }, from: "source", imageSent: false });
  });

  test("up to 8 KiB stays text; one byte more is base64 decoded into a temp file", async () => {
    const short = "A".repeat(SOURCE_TEXT_BYTES);
    expect((await read([`source=${short}`])).fields.source).toBe(short);
    const over = "QUJD".repeat(SOURCE_TEXT_BYTES / 4 + 1);
    expect(await read([`source=${over}`])).toMatchObject({ fields: {}, from: "source", file: Buffer.from(over, "base64").toString("hex") });
  });

  test("a long base64 source: blanks before it and a data: prefix are dropped; the bytes are exactly the image", async () => {
    for (const prefix of ["", "data:image/png;base64,", "DATA:image/jpeg;BASE64,", " \n", "\n data:image/webp;base64,"]) {
      const body = `source=${enc(prefix + LONG)}`;
      for (const size of [1, 7, 4096, body.length]) {
        const chunks = Array.from({ length: Math.ceil(body.length / size) }, (_, i) => body.slice(i * size, (i + 1) * size));
        expect((await read(chunks)).file).toBe(bytes.toString("hex"));
      }
    }
    expect(tempFiles()).toEqual([]);
  });

  test("image is source's other name: taken when no source came, answered in ImgBB's shape", async () => {
    expect(await read([`image=${enc("https://e.com/b.png")}`])).toMatchObject({ fields: { image: "https://e.com/b.png" }, from: "image", imageSent: true });
  });

  test("source ?? image: a source wins over an image before or after it; the last of one name wins; replaced files are removed", async () => {
    expect(await read([`image=${LONG_VALUE}&source=u1`])).toMatchObject({ fields: { source: "u1" }, from: "source", imageSent: true, file: undefined });
    expect(await read([`source=u1&image=${LONG_VALUE}`])).toMatchObject({ fields: { source: "u1" }, from: "source", imageSent: true, file: undefined });
    expect(await read([`source=${LONG_VALUE}&source=u2`])).toMatchObject({ fields: { source: "u2" }, file: undefined });
    expect(await read([`image=u1&image=${LONG_VALUE}`])).toMatchObject({ fields: {}, from: "image", file: bytes.toString("hex") });
    expect(tempFiles()).toEqual([]);
  });
});

describe("refusals", () => {
  test("an image over the cap (decoded) is refused while it streams, and its temp file removed", async () => {
    const big = Buffer.alloc(MAX_BYTES + 1, 1).toString("base64");
    expect(await refusal([`source=${big}`])).toBe("图片超过大小上限（0 MB）");
    expect(tempFiles()).toEqual([]);
  });

  test("a body longer than twice the base64 cap is refused: declared, unread; streamed, once it is past", async () => {
    const limit = 2 * (Math.ceil(MAX_BYTES / 3) * 4 + 4096);
    expect(await refusal(["key=1"], { "content-length": String(limit + 1) })).toBe("图片超过大小上限（0 MB）");
    expect(await refusal([`title=${"t".repeat(limit)}`])).toBe("图片超过大小上限（0 MB）");
    expect((await read([`title=${"t".repeat(limit - 6)}`])).fields).toEqual({});
  });

  test("text that is no base64 is refused once it is long, and nothing is left", async () => {
    expect(await refusal([`source=${"A".repeat(SOURCE_TEXT_BYTES)}*AAA`])).toBe("source 不是有效的 base64 数据或图片 URL");
    expect(await refusal([`source=${"A".repeat(SOURCE_TEXT_BYTES + 1)}`])).toBe("source 不是有效的 base64 数据或图片 URL");
    expect(tempFiles()).toEqual([]);
  });

  test("onField throwing (a wrong key) ends the read at once: nothing after it is read, nothing kept", async () => {
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++;
        controller.enqueue(Buffer.from(pulls === 1 ? `source=${LONG_VALUE}&key=bad&` : "format=json&"));
        if (pulls > 50) controller.close();
      },
    });
    const req = new Request("http://kura.test/", { method: "POST", body, duplex: "half" } as RequestInit);
    const err = await readUrlencodedForm(req, dir, limits, (name) => {
      if (name === "key") throw new Error("密钥无效");
    }).catch((e: Error) => e.message);
    expect(err).toBe("密钥无效");
    expect(pulls).toBeLessThanOrEqual(2);
    expect(tempFiles()).toEqual([]);
  });

  test("a body that breaks off is 上传中断, in a long source (whose file goes) or a short one", async () => {
    for (const sent of [`source=${LONG_VALUE.slice(0, 10_000)}`, "key=1&source=https%3A%2F%2Fe.com"]) {
      let pulled = false;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled) return controller.error(new Error("connection reset"));
          pulled = true;
          controller.enqueue(Buffer.from(sent));
        },
      });
      const req = new Request("http://kura.test/", { method: "POST", body, duplex: "half" } as RequestInit);
      expect(await readUrlencodedForm(req, dir, limits, () => {}).catch((e: Error) => e.message)).toBe("上传中断");
    }
    expect(tempFiles()).toEqual([]);
  });

  test("the bounds themselves are allowed: an image of exactly the cap, a body declared exactly at its limit", async () => {
    const atCap = Buffer.alloc(MAX_BYTES, 7);
    expect((await read([`source=${enc(atCap.toString("base64"))}`])).file).toBe(atCap.toString("hex"));
    const limit = 2 * (Math.ceil(MAX_BYTES / 3) * 4 + 4096);
    expect((await read(["key=1"], { "content-length": String(limit) })).fields).toEqual({ key: "1" });
  });

  test("a blank inside a data: prefix is no prefix: refused as base64", async () => {
    expect(await refusal([`source=${enc(`data:image/png; base64,${LONG}`)}`])).toBe("source 不是有效的 base64 数据或图片 URL");
  });

  test("no body at all: an empty form", async () => {
    const req = new Request("http://kura.test/", { method: "POST" });
    expect(await readUrlencodedForm(req, dir, limits, () => {})).toEqual({ fields: {} });
  });
});

describe("as a property: the streamed reading agrees with URLSearchParams over the whole body", () => {
  const shortText = fc.string({ maxLength: 20 });
  // Around the 8 KiB line: 6,000–6,300 bytes are 8,000–8,400 base64 characters.
  const base64Image = fc.uint8Array({ minLength: 6000, maxLength: 6300 }).map((b) => Buffer.from(b).toString("base64"));
  const image = fc.oneof(
    shortText,
    base64Image,
    base64Image.map((b) => `data:image/png;base64,${b}`),
    base64Image.map((b) => ` \n${b}`),
  );
  const pair = fc.oneof(
    fc.tuple(fc.constantFrom("key", "format", "expiration", "title", "nsfw"), shortText),
    fc.tuple(fc.constantFrom("source", "image"), image),
  );
  const pairs = fc.array(pair, { maxLength: 6 });

  /** The same rules read off URLSearchParams: last value wins per name, `source ?? image`, 8 KiB of text. */
  function oracle(params: URLSearchParams) {
    const fields: Record<string, string> = {};
    for (const name of ["key", "format", "expiration"]) {
      const all = params.getAll(name);
      if (all.length) fields[name] = all.at(-1)!;
    }
    const from: SourceName | undefined = params.has("source") ? "source" : params.has("image") ? "image" : undefined;
    let file: string | undefined;
    if (from) {
      const text = params.getAll(from).at(-1)!;
      if (Buffer.byteLength(text) <= SOURCE_TEXT_BYTES) fields[from] = text;
      else file = Buffer.from(text.replace(/^\s+/, "").replace(/^data:[^,]*;base64,/i, ""), "base64").toString("hex");
    }
    return { fields, from, imageSent: params.has("image"), file };
  }

  test("any form of these fields, split anywhere", async () => {
    await fc.assert(
      fc.asyncProperty(pairs, fc.array(fc.integer({ min: 0, max: 1 << 20 }), { maxLength: 8 }), async (list, cuts) => {
        const params = new URLSearchParams(list);
        const body = params.toString();
        const at = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
        const chunks = [0, ...at].map((start, i, all) => body.slice(start, all[i + 1] ?? body.length));
        const got = await read(chunks);
        const { told: _told, ...rest } = got;
        expect(rest).toEqual(oracle(params));
        expect(got.told).toEqual(list.filter(([n]) => ["key", "format", "expiration"].includes(n)));
        expect(tempFiles()).toEqual([]);
      }),
      fuzzParams(2),
    );
  });
});
