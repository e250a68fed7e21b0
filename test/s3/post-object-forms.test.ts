/**
 * POST Object's form handling under hostile or careless forms, black-box over HTTP: the parser's
 * limits (fields, parts, a field's length, the whole body), a broken multipart body, the file part's
 * name and place, fields after the file, a revoked credential, a `${filename}` that makes a bad key.
 * Every refusal is an S3 error with a Chinese message, stores nothing and leaves no temp file.
 */
import { createPresignedPost } from "@aws-sdk/s3-presigned-post";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { RawRequest } from "../http/raw-upload.helpers";
import { makePng } from "../helpers/images";
import { errorCodeOf, errorMessageOf, type S3Credential, type S3Fixture, s3User, sdkClient, signedRequest, startS3Fixture } from "./s3-setup";

type Part = { name: string; value: string } | { name: string; filename: string; bytes: Uint8Array };
const BOUNDARY = "kura-form-boundary";

/** A multipart/form-data body written by hand, so the tests control every byte. */
function formBody(parts: Part[], opts: { close?: boolean } = {}): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const head =
      "bytes" in part
        ? `Content-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: image/png`
        : `Content-Disposition: form-data; name="${part.name}"`;
    chunks.push(Buffer.from(`--${BOUNDARY}\r\n${head}\r\n\r\n`), Buffer.from("bytes" in part ? part.bytes : part.value), Buffer.from("\r\n"));
  }
  if (opts.close !== false) chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

describe("POST Object forms", () => {
  let f: S3Fixture;
  let png: Buffer;
  beforeAll(async () => {
    f = await startS3Fixture({ max_upload_mb: 1 });
    png = await makePng(24, 16, 4);
  });
  afterAll(() => f.server.dispose());

  const presignedFields = async (key: string, cred: S3Credential = f.cred, extra: { Conditions?: unknown[]; Fields?: Record<string, string> } = {}) =>
    (await createPresignedPost(sdkClient(cred), { Bucket: cred.bucket, Key: key, Expires: 600, ...(extra as object) })).fields;
  const fieldsOf = (fields: Record<string, string>): Part[] => Object.entries(fields).map(([name, value]) => ({ name, value }));
  const post = (body: Uint8Array | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
    fetch(`${f.cred.endpoint}/${f.cred.bucket}`, {
      method: "POST",
      headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}`, ...headers },
      body,
      ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
    } as RequestInit);
  const s3Error = async (res: Response) => {
    const xml = await res.text();
    return { status: res.status, code: errorCodeOf(xml), message: errorMessageOf(xml) };
  };
  const stored = async (key: string) => (await signedRequest(f, "HEAD", `/s3/${f.cred.bucket}/${key}`)).status;
  const tmpLeft = () => readdirSync(join(f.server.dataDir, "tmp"), { recursive: true }).map(String);

  test("fields after the file are ignored: neither checked against the policy nor applied", async () => {
    const fields = await presignedFields("forms/late.png");
    const res = await post(
      formBody([
        ...fieldsOf(fields),
        { name: "file", filename: "late.png", bytes: png },
        { name: "x-amz-meta-unsigned", value: "1" },
        { name: "success_action_status", value: "201" },
      ]),
    );
    expect(res.status).toBe(204);
    expect(await stored("forms/late.png")).toBe(200);
  });

  test("the file part is the one named file (in any case); other file parts are skipped; a form without it is refused", async () => {
    const fields = await presignedFields("forms/named.png");
    const other = { name: "photo", filename: "other.png", bytes: Buffer.from("not an image") };
    const ok = await post(formBody([...fieldsOf(fields), other, { name: "File", filename: "named.png", bytes: png }]));
    expect(await s3Error(ok)).toMatchObject({ status: 204 });
    expect(await stored("forms/named.png")).toBe(200);

    const missing = await post(formBody([...fieldsOf(await presignedFields("forms/none.png")), other]));
    expect(await s3Error(missing)).toEqual({ status: 400, code: "InvalidArgument", message: "表单上传必须包含一个名为 file 的文件字段（放在最后）" });
    expect(await stored("forms/none.png")).toBe(404);
  });

  test("the parser's limits: 64 fields, 80 parts, 20 KiB a field; a broken body or boundary is MalformedPOSTRequest", async () => {
    const fields = fieldsOf(await presignedFields("forms/limits.png"));
    const file = { name: "file", filename: "limits.png", bytes: png };
    const padding = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, value: "x" }));
    const tooManyFields = await post(formBody([...fields, ...padding(65 - fields.length, "x-ignore-"), file]));
    expect(await s3Error(tooManyFields)).toEqual({ status: 400, code: "MalformedPOSTRequest", message: "表单字段过多" });
    const skippedFiles = Array.from({ length: 81 - fields.length }, (_, i) => ({ name: `extra${i}`, filename: "x.bin", bytes: Buffer.from("x") }));
    const tooManyParts = await post(formBody([...fields, ...skippedFiles, file]));
    expect(await s3Error(tooManyParts)).toEqual({ status: 400, code: "MalformedPOSTRequest", message: "表单字段过多" });
    const longField = await post(formBody([...fields, { name: "x-ignore-long", value: "y".repeat(20 * 1024 + 1) }, file]));
    expect(await s3Error(longField)).toEqual({ status: 400, code: "MalformedPOSTRequest", message: "表单字段 x-ignore-long 过长" });
    // Exactly at the limits is a form like any other.
    expect((await post(formBody([...fields, ...padding(64 - fields.length, "x-ignore-"), file]))).status).toBe(204);
    expect((await post(formBody([...fields, { name: "x-ignore-long", value: "y".repeat(20 * 1024) }, file]))).status).toBe(204);
    expect((await post(formBody([...fields, ...skippedFiles.slice(0, 79 - fields.length), file]))).status).toBe(204);

    const cut = formBody([...fields, file]).subarray(0, -BOUNDARY.length - 20);
    expect(await s3Error(await post(cut))).toMatchObject({ status: 400, code: "MalformedPOSTRequest" });
    const noBoundary = await post(formBody([...fields, file]), { "content-type": "multipart/form-data" });
    expect(await s3Error(noBoundary)).toEqual({ status: 400, code: "MalformedPOSTRequest", message: "表单上传的 multipart 格式无效" });
    expect(await stored("forms/limits.png")).toBe(200); // only the form at the limits
    expect(tmpLeft()).toEqual([]);
  });

  test("a body over the upload cap plus the form's overhead is refused: declared, unread; streamed, once that much arrived", async () => {
    const limit = 1024 * 1024 + 64 * 20 * 1024 + 80 * 17 * 1024;
    const head = [
      `POST /s3/${f.cred.bucket} HTTP/1.1`,
      `Host: ${new URL(f.server.base).host}`,
      `Content-Type: multipart/form-data; boundary=${BOUNDARY}`,
      `Content-Length: ${limit + 1}`,
    ];
    const declared = await RawRequest.open(f.server, head.join("\r\n"), `--${BOUNDARY}\r\n`);
    const answer = await declared.answer;
    expect([answer?.status, errorCodeOf(answer?.body ?? "")]).toEqual([400, "EntityTooLarge"]);
    // An endless preamble before the first boundary: the parser skips it, the body cap ends it.
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        sent += 64 * 1024;
        c.enqueue(new Uint8Array(64 * 1024).fill(0x61));
        if (sent > 16 * limit) c.close();
      },
    });
    const streamed = await post(endless);
    expect(await s3Error(streamed)).toMatchObject({ status: 400, code: "EntityTooLarge" });
    expect(sent).toBeLessThan(4 * limit);
    expect(tmpLeft()).toEqual([]);
  });

  test("forms whose file has not come hold their fields within a share per address: the next one is SlowDown, and all is given back", async () => {
    // 40 fields of 19 KiB: ~760 KiB held each, before anything proves who sent it.
    const fields = formBody(
      Array.from({ length: 40 }, (_, i) => ({ name: `x-amz-meta-f${i}`, value: "v".repeat(19 * 1024) })),
      { close: false },
    );
    const head = [
      `POST /s3/${f.cred.bucket} HTTP/1.1`,
      `Host: ${new URL(f.server.base).host}`,
      `Content-Type: multipart/form-data; boundary=${BOUNDARY}`,
      "Transfer-Encoding: chunked",
    ].join("\r\n");
    const chunk = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")]);
    const held = await Promise.all(Array.from({ length: 4 }, () => RawRequest.open(f.server, head, chunk(fields))));
    try {
      const answers = await Promise.all(held.map((r) => r.within(3000)));
      const refused = answers.filter(Boolean);
      // 2 MiB an address: two forms fit, the third and fourth do not.
      expect(refused.map((a) => [a!.status, errorCodeOf(a!.body)])).toEqual([
        [503, "SlowDown"],
        [503, "SlowDown"],
      ]);
    } finally {
      for (const r of held) r.destroy();
    }
    // Their fields given back: two such forms fit the share again (once the server saw the hang-ups).
    let again: RawRequest[] = [];
    try {
      for (let attempt = 0; attempt < 20; attempt++) {
        again = await Promise.all([1, 2].map(() => RawRequest.open(f.server, head, chunk(fields))));
        const answers = await Promise.all(again.map((r) => r.within(500)));
        if (answers.every((a) => a === undefined)) break;
        for (const r of again) r.destroy();
        again = [];
        await Bun.sleep(100);
      }
      expect(again.length).toBe(2);
    } finally {
      for (const r of again) r.destroy();
    }
    // And a real form goes through.
    const ok = await post(formBody([...fieldsOf(await presignedFields("forms/after-held.png")), { name: "file", filename: "a.png", bytes: png }]));
    expect(ok.status).toBe(204);
  });

  test("a revoked credential is InvalidAccessKeyId; ${filename} is the file name's last segment, and a key it makes invalid is InvalidArgument; nothing is stored", async () => {
    const other = await s3User(f, "formuser");
    const fields = await presignedFields("forms/revoked.png", other.cred);
    await f.admin.json("POST", `/api/admin/tokens/${other.tokenId}/revoke`, undefined, 204);
    const revoked = await post(formBody([...fieldsOf(fields), { name: "file", filename: "revoked.png", bytes: png }]));
    expect(await s3Error(revoked)).toEqual({ status: 403, code: "InvalidAccessKeyId", message: "访问密钥 ID 不存在或已被撤销" });

    const templated = await createPresignedPost(sdkClient(f.cred), {
      Bucket: f.cred.bucket,
      Key: "forms/${filename}",
      Conditions: [["starts-with", "$key", "forms/"]],
      Expires: 600,
    });
    const { key: _, ...withoutExactKey } = templated.fields;
    const withFile = (key: string, filename: string) => post(formBody([...fieldsOf({ ...withoutExactKey, key }), { name: "file", filename, bytes: png }]));
    // The file name's directories never reach the key: only its last segment replaces ${filename}.
    expect((await withFile("forms/${filename}", "../../etc/escape.png")).status).toBe(204);
    expect(await stored("forms/escape.png")).toBe(200);
    expect(await stored("etc/escape.png")).toBe(404);
    // ".." as a whole name is dropped, which here leaves an empty segment.
    const refusal = await s3Error(await withFile("forms/${filename}/x.png", ".."));
    expect([refusal.status, refusal.code]).toEqual([400, "InvalidArgument"]);
    expect(refusal.message).toStartWith("无效的对象键");
    expect(await stored("forms/x.png")).toBe(404);
    expect(tmpLeft()).toEqual([]);
  });
});
