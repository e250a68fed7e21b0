/**
 * The upload form's rules one by one (src/images/upload/receive.ts, plain-form.ts), each judged on
 * both reading paths: a body with a declared length (in memory; Bun's parser for a plain form,
 * busboy for any other) and a streamed one (busboy to a temp file). multipart-paths.test.ts proves
 * the two paths agree on random forms; agreement says nothing about a rule both share, so here
 * each bound is tried at and past its value: the file cap, 1 KiB text fields, a large (base64)
 * field's cap, 32 parts and 20 text fields, the whole body's cap (declared: refused unread;
 * streamed: once past), the content type, the file name kept, onField, a body that breaks off,
 * a declared length the body overruns, and no temp file left by a refusal.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isPlainForm, plainFormParts } from "../../src/images/upload/plain-form";
import { IN_MEMORY_UPLOAD_BYTES, type MultipartOptions, parseMultipart, receiveMultipart } from "../../src/images/upload/receive";

const tmp = mkdtempSync(join(tmpdir(), "kura-form-rules-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const MAX = 64 * 1024;
const limits = { maxBytes: MAX, idleMs: 5000 };
const BOUNDARY = "kura-rules";
const TYPE = `multipart/form-data; boundary=${BOUNDARY}`;

type Part = { name: string; value: string | Uint8Array; fileName?: string; type?: string };
const text = (name: string, value: string): Part => ({ name, value });
const file = (bytes: Uint8Array, fileName = "a.png", name = "file"): Part => ({ name, value: bytes, fileName, type: "image/png" });
function formBody(parts: Part[]): Buffer {
  const pieces: Buffer[] = [];
  for (const p of parts) {
    const disposition = `Content-Disposition: form-data; name="${p.name}"${p.fileName === undefined ? "" : `; filename="${p.fileName}"`}`;
    pieces.push(
      Buffer.from(`--${BOUNDARY}\r\n${disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ""}\r\n`),
      Buffer.from(p.value),
      Buffer.from("\r\n"),
    );
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(pieces);
}

type Path = "declared" | "streamed";
const PATHS: Path[] = ["declared", "streamed"];
function request(body: Uint8Array, path: Path, headers: Record<string, string> = {}, chunk = 16 * 1024): Request {
  let at = 0;
  return new Request("http://kura.test/", {
    method: "POST",
    headers: { "content-type": TYPE, ...(path === "declared" ? { "content-length": String(body.length) } : {}), ...headers },
    body: new ReadableStream<Uint8Array>({
      pull(c) {
        if (at >= body.length) return c.close();
        c.enqueue(body.subarray(at, (at += chunk)));
      },
    }),
    duplex: "half",
  } as RequestInit);
}

/** What parseMultipart made of the form: fields, the file (name, size, same bytes?) or the error's message. */
async function outcome(parts: Part[], path: Path, allowed: readonly string[] = ["ttl", "album"], opts: MultipartOptions = {}) {
  const body = formBody(parts);
  try {
    const { file: got, fields } = await parseMultipart(request(body, path), tmp, limits, allowed, opts);
    const bytes = got ? (got.bytes ?? readFileSync(got.path!)) : undefined;
    if (got?.path) rmSync(got.path);
    const sent = parts.find((p) => p.name === (opts.fileField ?? "file") && p.fileName !== undefined)?.value;
    return { fields, file: got && { name: got.fileName, size: got.size, same: sent !== undefined && Buffer.from(sent).equals(bytes!) } };
  } catch (err) {
    return (err as Error).message;
  }
}
const tempFiles = () => readdirSync(tmp);
const TOO_LARGE = "图片超过大小上限（0 MB）";
const TOO_MANY = "表单字段过多";
const png = (size: number) => Buffer.alloc(size, 0x42);

describe("the file", () => {
  test("up to the cap it is taken, byte for byte; one byte more is refused and leaves no temp file", async () => {
    for (const path of PATHS) {
      expect(await outcome([file(png(MAX))], path)).toEqual({ fields: {}, file: { name: "a.png", size: MAX, same: true } });
      expect([path, await outcome([file(png(MAX + 1))], path)]).toEqual([path, TOO_LARGE]);
    }
    expect(tempFiles()).toEqual([]);
  });

  test("the name kept is the last / segment, `.` and `..` none; no name at all is image", async () => {
    for (const path of PATHS) {
      const names = [];
      for (const fileName of ["dir/sub/照片.png", "..", ".", "a/"])
        names.push(((await outcome([file(png(10), fileName)], path)) as { file: { name: string } }).file.name);
      expect([path, names]).toEqual([path, ["照片.png", "image", "image", "image"]]);
    }
  });

  test("the part named file counts and other file parts are skipped; a second file under that name is refused; another file field name can be asked for", async () => {
    for (const path of PATHS) {
      const first = await outcome([file(png(5), "x.png", "other"), file(png(7), "one.png")], path);
      expect(first).toMatchObject({ file: { name: "one.png", size: 7 } });
      // One stored and the other dropped without a word was the old answer.
      expect(await outcome([file(png(7), "one.png"), file(png(9), "two.png")], path)).toBe("一次只能上传一个文件：表单中的 file 字段出现了多次");
      expect(tempFiles()).toEqual([]);
      expect(await outcome([file(png(5), "s.png", "source")], path, [], { fileField: "source" })).toMatchObject({ file: { name: "s.png", size: 5 } });
      expect(await outcome([text("ttl", "60")], path)).toEqual({ fields: { ttl: "60" }, file: undefined });
    }
  });
});

describe("where the file goes", () => {
  test("a body declared at most 4 MiB is read in memory, one byte more streams to a temp file (0600) hashed on the way", async () => {
    const big = { maxBytes: 5 * 1024 * 1024, idleMs: 5000 };
    const shell = formBody([file(Buffer.alloc(0))]).length;
    for (const [extra, inMemory] of [
      [0, true],
      [1, false],
    ] as const) {
      const bytes = Buffer.alloc(IN_MEMORY_UPLOAD_BYTES - shell + extra, 0x33);
      const body = formBody([file(bytes)]);
      expect(body.length).toBe(IN_MEMORY_UPLOAD_BYTES + extra);
      const { file: got } = await parseMultipart(request(body, "declared"), tmp, big, []);
      expect([got!.bytes !== undefined, got!.path !== undefined]).toEqual([inMemory, !inMemory]);
      if (got!.path) {
        expect(statSync(got!.path).mode & 0o777).toBe(0o600);
        expect(got!.sha256).toBe(new Bun.CryptoHasher("sha256").update(bytes).digest("hex"));
        expect(readFileSync(got!.path).equals(bytes)).toBe(true);
        rmSync(got!.path);
      }
    }
  });

  test("receiveMultipart: a form without its file part is refused", async () => {
    for (const path of PATHS) {
      const err = await receiveMultipart(request(formBody([text("ttl", "1")]), path), tmp, limits, ["ttl"]).catch((e: Error) => e.message);
      expect([path, err]).toEqual([path, "缺少文件字段 file"]);
      const ok = await receiveMultipart(request(formBody([file(png(4))]), path), tmp, limits, []);
      expect(ok.file.size).toBe(4);
      if (ok.file.path) rmSync(ok.file.path);
    }
  });
});

describe("text fields", () => {
  test("up to 1 KiB in UTF-8 bytes is kept; more is refused with the field's name", async () => {
    for (const path of PATHS) {
      expect(await outcome([text("ttl", "1".repeat(1024))], path)).toMatchObject({ fields: { ttl: "1".repeat(1024) } });
      expect(await outcome([text("ttl", "1".repeat(1025))], path)).toBe("表单字段 ttl 超过 1 KiB");
      // 342 CJK characters are 1,026 bytes.
      expect(await outcome([text("album", "长".repeat(342))], path)).toBe("表单字段 album 超过 1 KiB");
      // A field that is not kept is still bounded.
      expect(await outcome([text("other", "x".repeat(1025))], path)).toBe("表单字段 other 超过 1 KiB");
    }
  });

  test("only the allowed fields are kept; a large field is kept whatever the list, up to the base64 of the cap", async () => {
    const base64Limit = Math.ceil(MAX / 3) * 4 + 4096;
    for (const path of PATHS) {
      expect(await outcome([text("ttl", "1"), text("other", "2"), text("album", "3")], path)).toMatchObject({ fields: { ttl: "1", album: "3" } });
      const opts = { largeFields: ["source"] };
      expect(await outcome([text("source", "A".repeat(base64Limit))], path, [], opts)).toMatchObject({ fields: { source: "A".repeat(base64Limit) } });
      expect(await outcome([text("source", "A".repeat(base64Limit + 1))], path, [], opts)).toBe(TOO_LARGE);
      // With a large field in the form, the other fields keep their 1 KiB.
      expect(await outcome([text("ttl", "1".repeat(1025))], path, ["ttl"], opts)).toBe("表单字段 ttl 超过 1 KiB");
    }
  });

  test("onField hears each kept field as it arrives, and throwing from it ends the read with that error", async () => {
    for (const path of PATHS) {
      const heard: string[] = [];
      await outcome([text("ttl", "1"), text("other", "2"), text("album", "3")], path, undefined, { onField: (n, v) => void heard.push(`${n}=${v}`) });
      expect(heard).toEqual(["ttl=1", "album=3"]);
      const refused = await outcome([text("ttl", "1"), file(png(10))], path, undefined, {
        onField: () => {
          throw new Error("密钥无效");
        },
      });
      expect(refused).toBe("密钥无效");
    }
    expect(tempFiles()).toEqual([]);
  });
});

describe("how many parts", () => {
  test("32 parts and 20 text fields are taken; one more of either is 表单字段过多", async () => {
    const texts = (n: number) => Array.from({ length: n }, (_, i) => text(`t${i}`, "x"));
    const files = (n: number) => Array.from({ length: n }, (_, i) => file(png(1), `f${i}.png`, `f${i}`));
    for (const path of PATHS) {
      expect(await outcome(texts(20), path)).toMatchObject({ fields: {} });
      expect(await outcome(texts(21), path)).toBe(TOO_MANY);
      expect(await outcome([...texts(20), ...files(12)], path)).toMatchObject({ fields: {} });
      expect(await outcome([...texts(20), ...files(13)], path)).toBe(TOO_MANY);
      expect(await outcome(files(32), path)).toMatchObject({ file: undefined });
      expect(await outcome(files(33), path)).toBe(TOO_MANY);
    }
  });
});

describe("the request", () => {
  test("not multipart/form-data, or no body: refused naming the file field", async () => {
    const json = new Request("http://kura.test/", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(await parseMultipart(json, tmp, limits, []).catch((e: Error) => e.message)).toBe("请求必须是 multipart/form-data，文件字段名为 file");
    const other = new Request("http://kura.test/", { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
    expect(await parseMultipart(other, tmp, limits, [], { fileField: "source" }).catch((e: Error) => e.message)).toBe(
      "请求必须是 multipart/form-data，文件字段名为 source",
    );
    const upper = new Request("http://kura.test/", {
      method: "POST",
      headers: { "content-type": TYPE.toUpperCase().replace(BOUNDARY.toUpperCase(), BOUNDARY) },
      body: new Uint8Array(formBody([text("ttl", "1")])),
    });
    expect(await parseMultipart(upper, tmp, limits, ["ttl"])).toMatchObject({ fields: { ttl: "1" } });
    const empty = new Request("http://kura.test/", { method: "POST", headers: { "content-type": TYPE } });
    expect(await parseMultipart(empty, tmp, limits, []).catch((e: Error) => e.message)).toBe("缺少请求体");
  });

  test("a body declared longer than the largest acceptable form is refused unread; streamed, once that much has come", async () => {
    const bodyLimit = MAX + 64 * 1024;
    let pulls = 0;
    const counting = new Request("http://kura.test/", {
      method: "POST",
      headers: { "content-type": TYPE, "content-length": String(bodyLimit + 1) },
      // No read ahead: a pull is a read by the parser.
      body: new ReadableStream<Uint8Array>(
        {
          pull(c) {
            pulls++;
            c.enqueue(new Uint8Array(1024));
          },
        },
        { highWaterMark: 0 },
      ),
      duplex: "half",
    } as RequestInit);
    expect(await parseMultipart(counting, tmp, limits, []).catch((e: Error) => e.message)).toBe(TOO_LARGE);
    expect(pulls).toBe(0);
    // Exactly at the limit, declared: read (and here refused for what it holds, not for its length).
    const atLimit = formBody([text("other", "x".repeat(1000))]);
    const padded = Buffer.concat([atLimit, Buffer.alloc(bodyLimit - atLimit.length, 0x20)]);
    expect(await parseMultipart(request(padded, "streamed", { "content-length": String(bodyLimit) }), tmp, limits, []).catch((e: Error) => e.message)).not.toBe(
      TOO_LARGE,
    );
    // Streamed: an endless preamble is cut at the limit.
    const preamble = Buffer.concat([Buffer.alloc(bodyLimit + 1, 0x20), formBody([text("ttl", "1")])]);
    expect(await parseMultipart(request(preamble, "streamed"), tmp, limits, ["ttl"]).catch((e: Error) => e.message)).toBe(TOO_LARGE);
    expect(tempFiles()).toEqual([]);
  });

  test("a declared length the body overruns is a malformed form; a body that breaks off is 上传中断", async () => {
    const body = formBody([text("ttl", "1")]);
    const overrun = request(Buffer.concat([body, Buffer.from("more")]), "streamed", { "content-length": String(body.length) });
    expect(await parseMultipart(overrun, tmp, limits, ["ttl"]).catch((e: Error) => e.message)).toBe("multipart 请求格式无效");
    for (const path of PATHS) {
      let sent = false;
      const broken = new Request("http://kura.test/", {
        method: "POST",
        headers: { "content-type": TYPE, ...(path === "declared" ? { "content-length": String(body.length + 5000) } : {}) },
        body: new ReadableStream<Uint8Array>({
          pull(c) {
            if (sent) return c.error(new Error("connection reset"));
            sent = true;
            c.enqueue(formBody([file(png(3000))]).subarray(0, 2000));
          },
        }),
        duplex: "half",
      } as RequestInit);
      expect([path, await parseMultipart(broken, tmp, limits, []).catch((e: Error) => e.message)]).toEqual([path, "上传中断"]);
    }
    expect(tempFiles()).toEqual([]);
  });

  test("a body that stops sending is a 408 after the idle deadline, on both paths", async () => {
    for (const path of PATHS) {
      const body = formBody([file(png(3000))]);
      const stalled = new Request("http://kura.test/", {
        method: "POST",
        headers: { "content-type": TYPE, ...(path === "declared" ? { "content-length": String(body.length) } : {}) },
        body: new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(body.subarray(0, 100));
          },
        }),
        duplex: "half",
      } as RequestInit);
      const started = Date.now();
      const err = await parseMultipart(stalled, tmp, { maxBytes: MAX, idleMs: 200 }, []).catch((e: Error & { problem?: string }) => e);
      expect([path, (err as { problem?: string }).problem]).toEqual([path, "stalled"]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(180);
    }
    expect(tempFiles()).toEqual([]);
  });
});

describe("which forms Bun's parser may read (plain-form.ts)", () => {
  const plain = (parts: Part[], type = TYPE) => isPlainForm(formBody(parts), type);
  test("the forms clients send are plain: quoted or bare boundary, with or without the blank, a typed file part", () => {
    expect(plain([text("ttl", "1"), file(png(3))])).toBe(true);
    expect(isPlainForm(formBody([text("ttl", "1")]), `multipart/form-data;boundary="${BOUNDARY}"`)).toBe(true);
    expect(plain([])).toBe(true);
  });

  test("not plain: a charset or other parameter, a preamble, LF line breaks, a typed text part, an empty file name, a second disposition", () => {
    expect(plain([text("ttl", "1")], `${TYPE}; charset=utf-8`)).toBe(false);
    expect(isPlainForm(Buffer.concat([Buffer.from("preamble\r\n"), formBody([text("ttl", "1")])]), TYPE)).toBe(false);
    expect(
      isPlainForm(
        Buffer.from(
          formBody([text("ttl", "1")])
            .toString("latin1")
            .replace(/\r\n/g, "\n"),
          "latin1",
        ),
        TYPE,
      ),
    ).toBe(false);
    expect(plain([{ name: "ttl", value: "1", type: "text/plain" }])).toBe(false);
    expect(plain([file(png(3), "")])).toBe(false);
    const twice = Buffer.from(
      formBody([text("ttl", "1")])
        .toString("latin1")
        .replace('name="ttl"', 'name="ttl"\r\nContent-Disposition: form-data; name="x"'),
      "latin1",
    );
    expect(isPlainForm(twice, TYPE)).toBe(false);
  });

  /** `formBody` with its text edited as latin1 (bytes kept), for structures the builder does not make. */
  const edited = (parts: Part[], edit: (text: string) => string) => Buffer.from(edit(formBody(parts).toString("latin1")), "latin1");

  test("not plain: a body that does not start with the boundary, a boundary not followed by CRLF, a type with anything before it", () => {
    const sample = [text("ttl", "1")];
    const opening = `--${BOUNDARY}`;
    // The same length as the boundary, so only the check of the opening can refuse it.
    expect(
      isPlainForm(
        edited(sample, (t) => "x".repeat(opening.length) + t.slice(opening.length)),
        TYPE,
      ),
    ).toBe(false);
    expect(
      isPlainForm(
        edited(sample, (t) => `${opening}xx${t.slice(opening.length + 2)}`),
        TYPE,
      ),
    ).toBe(false);
    expect(isPlainForm(formBody(sample), `x${TYPE}`)).toBe(false);
  });

  test("not plain: a header other than the disposition and one Content-Type, two Content-Types, no disposition at all", () => {
    const typed = "Content-Type: image/png";
    const disposition = 'Content-Disposition: form-data; name="ttl"';
    const cases: [rule: string, parts: Part[], from: string, to: string][] = [
      ["another header beside the Content-Type", [file(png(3))], typed, `${typed}\r\nX-Extra: 1`],
      ["another header instead of the Content-Type", [file(png(3))], typed, "X-Extra: 1"],
      ["two Content-Types", [file(png(3))], typed, `${typed}\r\n${typed}`],
      ["another header instead of the disposition", [text("ttl", "1")], disposition, "X-Extra: 1"],
      ["a Content-Type and no disposition", [text("ttl", "1")], disposition, "Content-Type: text/plain"],
    ];
    for (const [rule, parts, from, to] of cases)
      expect([
        rule,
        isPlainForm(
          edited(parts, (t) => t.replace(from, to)),
          TYPE,
        ),
      ]).toEqual([rule, false]);
  });

  test("not plain: a content that starts with the delimiter right after the blank line (busboy reads an empty part there)", () => {
    expect(
      isPlainForm(
        edited([text("ttl", "1"), text("album", "2")], (t) => t.replace('name="ttl"\r\n\r\n1\r\n', 'name="ttl"\r\n\r\n')),
        TYPE,
      ),
    ).toBe(false);
    // An empty content (the delimiter after the blank line's CRLF) is plain.
    expect(plainFormParts(formBody([text("ttl", ""), text("album", "2")]), TYPE)?.map((p) => p.end - p.start)).toEqual([0, 1]);
  });

  test("the parts: names and file names decoded as UTF-8, where each content starts and ends in the body", () => {
    const body = formBody([text("相册", "a\r\nb"), file(Buffer.from("PNGDATA"), "图 1.png"), text("ttl", "")]);
    const parts = plainFormParts(body, TYPE)!;
    expect(parts.map(({ name, fileName }) => ({ name, fileName }))).toEqual([
      { name: "相册", fileName: undefined },
      { name: "file", fileName: "图 1.png" },
      { name: "ttl", fileName: undefined },
    ]);
    expect(parts.map((p) => body.toString("utf8", p.start, p.end))).toEqual(["a\r\nb", "PNGDATA", ""]);
  });

  test("a part header of up to 8 KiB is plain, longer is not; the body must end right after the close delimiter (and a CRLF)", () => {
    const header = (n: number) => file(png(3), `${"n".repeat(n)}.png`);
    const fixed = Buffer.byteLength(`Content-Disposition: form-data; name="file"; filename=".png"\r\nContent-Type: image/png`);
    expect(plain([header(8 * 1024 - fixed)])).toBe(true);
    expect(plain([header(8 * 1024 - fixed + 1)])).toBe(false);
    const body = formBody([text("ttl", "1")]);
    expect(isPlainForm(body.subarray(0, body.length - 2), TYPE)).toBe(true);
    expect(isPlainForm(Buffer.concat([body, Buffer.from("x")]), TYPE)).toBe(false);
    expect(isPlainForm(Buffer.concat([body.subarray(0, body.length - 2), Buffer.from("\r")]), TYPE)).toBe(false);
  });
});
