/**
 * Open S3 multipart uploads across a restart (src/s3/multipart-restart.ts): an upgrade's `systemctl
 * restart kura` in the middle of an rclone sync must not fail the large files in flight. Black-box
 * against real Kura processes on one data directory, with raw SigV4 requests and the AWS SDK.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CompleteMultipartUploadCommand, GetObjectCommand, ListMultipartUploadsCommand, ListPartsCommand, UploadPartCommand } from "@aws-sdk/client-s3";
import { makePng } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { type S3Fixture, sdkClient, signedRequest, startS3Fixture } from "./s3-setup";

let f: S3Fixture;
let dataDir: string;
beforeAll(async () => {
  f = await startS3Fixture();
  dataDir = f.server.dataDir;
});
afterAll(async () => {
  await f.server.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");
const multipartDir = () => join(f.server.dataDir, "multipart");

/** The same data directory served by a new process (the credentials live in its database). */
async function restart(signal: NodeJS.Signals = "SIGTERM") {
  await f.server.stop(signal);
  f.server = await KuraServer.start({ dataDir: f.server.dataDir });
  f.cred = { ...f.cred, endpoint: `${f.server.base}/s3` };
}

async function createUpload(key: string): Promise<string> {
  const created = await signedRequest(f, "POST", `/s3/kura/${key}?uploads=`);
  expect(created.status).toBe(200);
  return /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())![1]!;
}

function stagedBytes(uploadId: string): number | undefined {
  const db = new Database(join(f.server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query<{ staged_bytes: number }, [string]>("SELECT staged_bytes FROM multipart_uploads WHERE upload_id = ?").get(uploadId)?.staged_bytes;
  } finally {
    db.close();
  }
}

test("an open upload goes on after a restart: listed with its parts, the next part taken, completed into the right bytes", async () => {
  const png = await makePng(1200, 900, 7); // incompressible enough for a 5 MiB first part with noise after it
  const first = Buffer.concat([png, randomBytes(5 * 1024 * 1024 - png.length)]);
  const second = randomBytes(1000);
  const key = "restart/kept.png";
  const uploadId = await createUpload(key);
  const part = await signedRequest(f, "PUT", `/s3/kura/${key}?partNumber=1&uploadId=${uploadId}`, { body: first });
  expect([part.status, part.headers.get("etag")]).toEqual([200, `"${md5(first)}"`]);

  await restart();
  expect(f.server.logs).toMatch(/msg="?未完成的 S3 分片上传已保留，客户端可继续上传"? uploads=1/);
  const s3 = sdkClient(f.cred);
  const listed = await s3.send(new ListMultipartUploadsCommand({ Bucket: "kura" }));
  expect(listed.Uploads?.map((u) => [u.Key, u.UploadId])).toEqual([[key, uploadId]]);
  const parts = await s3.send(new ListPartsCommand({ Bucket: "kura", Key: key, UploadId: uploadId }));
  expect(parts.Parts?.map((p) => [p.PartNumber, p.ETag, p.Size])).toEqual([[1, `"${md5(first)}"`, first.length]]);
  const next = await s3.send(new UploadPartCommand({ Bucket: "kura", Key: key, UploadId: uploadId, PartNumber: 2, Body: second }));
  await s3.send(
    new CompleteMultipartUploadCommand({
      Bucket: "kura",
      Key: key,
      UploadId: uploadId,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: `"${md5(first)}"` },
          { PartNumber: 2, ETag: next.ETag },
        ],
      },
    }),
  );
  const stored = await s3.send(new GetObjectCommand({ Bucket: "kura", Key: key }));
  expect(md5(await stored.Body!.transformToByteArray())).toBe(md5(Buffer.concat([first, second])));
  expect(readdirSync(multipartDir())).toEqual([]);
}, 60_000);

test("a part cut off by a crash leaves nothing; leftovers go; the counted bytes are the files' own", async () => {
  const key = "restart/cut.png";
  const uploadId = await createUpload(key);
  const kept = randomBytes(4096);
  expect((await signedRequest(f, "PUT", `/s3/kura/${key}?partNumber=1&uploadId=${uploadId}`, { body: kept })).status).toBe(200);

  // Part 2's body stops halfway; the server dies while the part is being received.
  const half = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(randomBytes(64 * 1024));
    },
  });
  const cut = signedRequest(f, "PUT", `/s3/kura/${key}?partNumber=2&uploadId=${uploadId}`, {
    stream: half,
    headers: { "content-length": String(1024 * 1024), "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
  }).catch(() => undefined);
  for (const deadline = Date.now() + 10_000; !readdirSync(multipartDir()).some((n) => n.endsWith(".partial")) && Date.now() < deadline; ) await Bun.sleep(20);
  expect(readdirSync(multipartDir()).filter((n) => n.endsWith(".partial"))).toHaveLength(1);
  // Left by something else: the folder of an upload whose row is gone, and a wrong count.
  const orphan = join(multipartDir(), "0".repeat(32));
  mkdirSync(orphan);
  writeFileSync(join(orphan, `1.${md5(kept)}`), kept);
  await f.server.stop("SIGKILL");
  await cut;
  const db = new Database(join(f.server.dataDir, "kura.db"));
  db.run("UPDATE multipart_uploads SET staged_bytes = 999999 WHERE upload_id = ?", [uploadId]);
  db.close();

  await restart("SIGKILL");
  expect(readdirSync(multipartDir())).toEqual([uploadId]);
  expect(existsSync(orphan)).toBe(false);
  expect(readdirSync(join(multipartDir(), uploadId))).toEqual([`1.${md5(kept)}`]);
  expect(stagedBytes(uploadId)).toBe(kept.length);
  const parts = await signedRequest(f, "GET", `/s3/kura/${key}?uploadId=${uploadId}`);
  expect((await parts.text()).match(/<PartNumber>\d+<\/PartNumber>/g)).toEqual(["<PartNumber>1</PartNumber>"]);
  // Aborted, it is gone for good: rows and files.
  expect((await signedRequest(f, "DELETE", `/s3/kura/${key}?uploadId=${uploadId}`)).status).toBe(204);
  expect(readdirSync(multipartDir())).toEqual([]);
}, 60_000);
