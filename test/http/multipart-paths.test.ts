/**
 * An upload form is read on one of two paths: a body with a declared length of at most 4 MiB in
 * memory, anything else (chunked, larger) streamed to a temp file. The same form gets the same
 * answer on both: a file part before the one named `file` is skipped on both, and the part and
 * field limits hold on both.
 */
import { describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { makePng } from "../helpers/images";

const { server, admin } = useAdmin();
const BOUNDARY = "kurapaths";

const filePart = (name: string, fileName: string, bytes: Uint8Array) =>
  Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"; filename="${fileName}"\r\nContent-Type: image/png\r\n\r\n`),
    Buffer.from(bytes),
    Buffer.from("\r\n"),
  ]);
const textPart = (name: string, value: string) => Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
const form = (...parts: Buffer[]) => Buffer.concat([...parts, Buffer.from(`--${BOUNDARY}--\r\n`)]);

/** Status and body of the same form sent with a declared length (in memory) and chunked (streamed). */
async function bothPaths(body: Buffer, path = "/api/admin/upload", boundary = BOUNDARY): Promise<{ declared: string; chunked: string }> {
  const send = async (payload: BodyInit) => {
    const res = await fetch(server.url(path), {
      method: "POST",
      headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": `multipart/form-data; boundary=${boundary}` },
      body: payload,
      duplex: "half",
    } as RequestInit);
    const text = await res.text();
    // An image id differs between the two uploads; its presence is what counts.
    return `${res.status} ${res.ok ? "uploaded" : text}`;
  };
  const declared = await send(new Uint8Array(body));
  const chunked = await send(
    new ReadableStream({
      start(c) {
        c.enqueue(new Uint8Array(body));
        c.close();
      },
    }),
  );
  return { declared, chunked };
}

describe("the same form, the same answer on both paths", () => {
  test("a file part before the one named file is skipped, and the upload succeeds", async () => {
    const png = await makePng(40, 30, 5);
    const { declared, chunked } = await bothPaths(form(filePart("other", "thumb.png", png), filePart("file", "real.png", png)));
    expect(declared).toBe("200 uploaded");
    expect(chunked).toBe(declared);
  });

  test("more than 32 parts is 400 表单字段过多", async () => {
    const png = await makePng(40, 30, 6);
    const many = Array.from({ length: 40 }, (_, i) => textPart(`x${i}`, "1"));
    const { declared, chunked } = await bothPaths(form(filePart("file", "a.png", png), ...many));
    expect(declared).toBe(`400 ${JSON.stringify({ error: "表单字段过多" })}`);
    expect(chunked).toBe(declared);
  });

  test("more than 20 text fields is 400 表单字段过多", async () => {
    const png = await makePng(40, 30, 7);
    const many = Array.from({ length: 21 }, (_, i) => textPart(`x${i}`, "1"));
    const { declared, chunked } = await bothPaths(form(filePart("file", "a.png", png), ...many));
    expect(declared).toBe(`400 ${JSON.stringify({ error: "表单字段过多" })}`);
    expect(chunked).toBe(declared);
  });

  test("a text field is limited in UTF-8 bytes on both paths: 400 CJK characters are 1,200 bytes, over 1 KiB", async () => {
    const png = await makePng(40, 30, 9);
    // Chevereto reads its key from the form; the limit is the same for every kept text field.
    const { declared, chunked } = await bothPaths(form(textPart("key", "钥".repeat(400)), filePart("source", "a.png", png)), "/api/1/upload");
    expect(declared).toStartWith("400 ");
    expect(declared).toContain("表单字段 key 超过 1 KiB");
    expect(chunked).toBe(declared);
  });

  test("a well-formed small form uploads on both paths", async () => {
    const png = await makePng(40, 30, 8);
    const { declared, chunked } = await bothPaths(form(textPart("exif_policy", "strip"), filePart("file", "ok.png", png)));
    expect(declared).toBe("200 uploaded");
    expect(chunked).toBe(declared);
  });

  // Found by the HTTP audit: each of these got one answer in memory and another streamed. Forms
  // that are not plain (src/images/upload/plain-form.ts) are read by busboy on both paths.
  test("odd forms: a NUL or filename*= in the part header, a 200-character boundary, a 20 KB file name", async () => {
    const png = await makePng(40, 30, 10);
    const part = (disposition: string, boundary = BOUNDARY) =>
      Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; ${disposition}\r\nContent-Type: image/png\r\n\r\n`),
        Buffer.from(png),
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
    const malformed = `400 ${JSON.stringify({ error: "multipart 请求格式无效" })}`;
    const cases: [string, Buffer, string, string?][] = [
      ["NUL in the file name", part('filename="a\0b.png"'), malformed],
      ["RFC 5987 file name only", part("filename*=UTF-8''%E7%85%A7%E7%89%87.png"), "200 uploaded"],
      ["20 KB file name", part(`filename="${"a".repeat(20000)}.png"`), malformed],
      ["200-character boundary", part('filename="a.png"', "b".repeat(200)), "200 uploaded", "b".repeat(200)],
    ];
    for (const [label, body, expected, boundary] of cases) {
      const { declared, chunked } = await bothPaths(body, "/api/admin/upload", boundary);
      expect({ label, declared }).toEqual({ label, declared: expected });
      expect({ label, chunked }).toEqual({ label, chunked: declared });
    }
  });
});
