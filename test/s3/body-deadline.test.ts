/**
 * The upload idle deadline on `/s3/` (upload_idle_timeout_seconds, as on every other upload
 * surface): a signed PutObject or UploadPart whose body stops arriving is S3's 400 RequestTimeout
 * once the deadline passed, with the connection closed, nothing stored and its slot free again;
 * a POST Object form likewise. A browser form whose body ends inside a part that is not the file
 * is refused without taking the process down.
 */
import aws4 from "aws4";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { makePng } from "../helpers/images";
import { RawRequest } from "../http/raw-upload.helpers";
import { queryDb } from "../http/channels.helpers";
import { errorCodeOf as codeOf, startS3Fixture, type S3Fixture } from "./s3-setup";
import { signedS3 } from "./signed-request";

let f: S3Fixture;
beforeAll(async () => {
  // One upload slot: a slot the stalled body kept would turn the next upload into SlowDown.
  f = await startS3Fixture({ upload_idle_timeout_seconds: 1, max_concurrent_uploads: 1 });
});
afterAll(() => f.server.dispose());

/** The head of a signed request whose body is declared UNSIGNED-PAYLOAD, as rclone and the SDK send large bodies. */
function signedHead(method: string, path: string, length: number): string {
  const { host } = new URL(f.server.base);
  const signed = aws4.sign(
    { host, path, method, service: "s3", region: "us-east-1", headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": String(length) } },
    { accessKeyId: f.cred.access_key_id, secretAccessKey: f.cred.secret_access_key },
  );
  const headers = Object.entries(signed.headers as Record<string, string>).map(([k, v]) => `${k}: ${v}`);
  return [`${method} ${path} HTTP/1.1`, ...headers].join("\r\n");
}

const tmpLeft = () => readdirSync(join(f.server.dataDir, "tmp"), { recursive: true }).map(String);

test("a PutObject whose body stops arriving is RequestTimeout after the deadline, connection closed, nothing stored", async () => {
  const png = await makePng(200, 150, 31);
  const path = "/s3/kura/stalled.png";
  const req = await RawRequest.open(f.server, signedHead("PUT", path, png.length), png.subarray(0, 500));
  expect(await req.within(600)).toBeUndefined(); // still waiting for the rest well within the second
  const answer = await req.answer;
  expect(answer?.status).toBe(400);
  expect(codeOf(answer!.body)).toBe("RequestTimeout");
  expect(answer!.ms).toBeGreaterThanOrEqual(900);
  expect(answer!.headers.connection).toBe("close");
  expect(queryDb(f.server, "SELECT id FROM images WHERE object_key = ?", "stalled.png")).toEqual([]);
  expect(tmpLeft()).toEqual([]);
  // The one upload slot is free again.
  expect((await signedS3(f.server.base, f.cred, "PUT", "/s3/kura/after.png", { body: png })).status).toBe(200);
});

test("an UploadPart whose body stops arriving is RequestTimeout too, and stages nothing", async () => {
  const created = await signedS3(f.server.base, f.cred, "POST", "/s3/kura/parts.png?uploads=");
  const id = /<UploadId>(\w+)<\/UploadId>/.exec(await created.text())![1]!;
  const path = `/s3/kura/parts.png?partNumber=1&uploadId=${id}`;
  const req = await RawRequest.open(f.server, signedHead("PUT", path, 4096), new Uint8Array(100));
  const answer = await req.answer;
  expect([answer?.status, codeOf(answer!.body)]).toEqual([400, "RequestTimeout"]);
  expect(queryDb<{ staged_bytes: number }>(f.server, "SELECT staged_bytes FROM multipart_uploads WHERE upload_id = ?", id)).toEqual([{ staged_bytes: 0 }]);
  // Nor a file: no part received halfway (`*.partial`) and no parts folder.
  expect(readdirSync(join(f.server.dataDir, "multipart"))).toEqual([]);
});

test("a POST Object form whose body stops arriving is RequestTimeout", async () => {
  const boundary = "kurapostdeadline";
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="key"\r\n\r\nform.png\r\n`;
  const { host } = new URL(f.server.base);
  const req = await RawRequest.open(
    f.server,
    [`POST /s3/kura HTTP/1.1`, `host: ${host}`, `content-type: multipart/form-data; boundary=${boundary}`, "content-length: 100000"].join("\r\n"),
    head,
  );
  const answer = await req.answer;
  expect([answer?.status, codeOf(answer!.body)]).toEqual([400, "RequestTimeout"]);
});

test.each([
  ["a part other than the file", "other"],
  ["the file part itself, with no policy", "file"],
])("a POST Object body that ends inside %s is refused, and the server lives on", async (_, part) => {
  const boundary = "kurapostcut";
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="${part}"; filename="x.png"\r\nContent-Type: image/png\r\n\r\nhello\r\n`;
  const res = await fetch(`${f.server.base}/s3/kura`, {
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
    body: new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(body));
        c.close();
      },
    }),
    duplex: "half",
  } as RequestInit);
  // 400 MalformedPOSTRequest, or 403 when the missing policy is noticed first.
  expect([400, 403]).toContain(res.status);
  await Bun.sleep(200);
  expect(f.server.proc.exitCode).toBeNull();
  expect((await fetch(`${f.server.base}/healthz`)).status).toBe(200);
});
