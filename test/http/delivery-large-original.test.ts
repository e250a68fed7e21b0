/**
 * Originals too big to be kept in memory (over 2 MiB) are sent from the channel. From a plain
 * local disk the answer is the file itself (sendfile, README "Scaling"); from an encrypted
 * channel it is the decrypted stream. Either way every byte, length and range must be exact,
 * under `/i/`, `/o/` and S3 GetObject, and an encrypted channel must never send its ciphertext.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { form, largeNoiseJpeg } from "../helpers/images";
import { queryDb, waitReplicaState } from "./channels.helpers";
import { sdkClient, startS3Fixture, type S3Fixture } from "../s3/s3-setup";

const MiB = 1024 * 1024;

/**
 * An answer sent from the file always carries its length. Bun 1.4 frames a stream body as
 * chunked whatever Content-Length says (oven-sh/bun#10507), so a streamed one may not.
 */
function expectLength(res: Response, length: number, fromFile: boolean) {
  const header = res.headers.get("content-length");
  if (fromFile) expect(header).toBe(String(length));
  else expect(header === null ? res.headers.get("transfer-encoding") : header).toBe(header === null ? "chunked" : String(length));
}

describe("originals over 2 MiB", () => {
  let f: S3Fixture;
  let s3: S3Client;
  let bytes: Buffer;
  let id: string;
  let userId: string;
  const encDir = mkdtempSync(join(tmpdir(), "kura-large-enc-"));
  afterAll(async () => {
    await f.server.dispose();
    rmSync(encDir, { recursive: true, force: true });
  });

  beforeAll(async () => {
    f = await startS3Fixture({ max_upload_mb: 20, exif_policy: "passthrough" });
    s3 = sdkClient(f.cred);
    bytes = await largeNoiseJpeg(2654435761);
    expect(bytes.length).toBeGreaterThan(2 * MiB + 100_000);
    await s3.send(new PutObjectCommand({ Bucket: f.cred.bucket, Key: "big/photo.jpg", Body: bytes, ContentType: "image/jpeg" }));
    userId = (await f.admin.json("GET", "/api/admin/me")).user.id;
    id = (await f.admin.json("POST", "/api/admin/upload", form(bytes, "photo.jpg"))).id;
  });

  const ranges = (size: number): [string, number, number][] => [
    ["bytes=0-0", 0, 0],
    ["bytes=100-99999", 100, 99_999], // under 1 MiB: Bun reads it instead of sendfile
    [`bytes=7-${MiB + 300_000}`, 7, MiB + 300_000], // over 1 MiB: sendfile of a slice
    [`bytes=${size - 1_500_000}-`, size - 1_500_000, size - 1],
    ["bytes=-37", size - 37, size - 1],
  ];

  async function expectExact(where: string, fromFile: boolean) {
    for (const path of [`/i/${id}`, `/o/${userId}/big/photo.jpg`]) {
      const whole = await fetch(f.server.url(path));
      expect(`${where} ${path} ${whole.status}`).toBe(`${where} ${path} 200`);
      expectLength(whole, bytes.length, fromFile);
      expect(whole.headers.get("content-type")).toBe("image/jpeg");
      expect(whole.headers.get("x-content-type-options")).toBe("nosniff");
      expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);
      const head = await fetch(f.server.url(path), { method: "HEAD" });
      expect(head.headers.get("content-length")).toBe(String(bytes.length));
      for (const [header, start, end] of ranges(bytes.length)) {
        const res = await fetch(f.server.url(path), { headers: { range: header } });
        const body = Buffer.from(await res.arrayBuffer());
        expect(`${where} ${path} ${header} ${res.status}`).toBe(`${where} ${path} ${header} 206`);
        expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/${bytes.length}`);
        expectLength(res, end - start + 1, fromFile);
        expect(body.equals(bytes.subarray(start, end + 1))).toBe(true);
      }
    }
    for (const [header, start, end] of ranges(bytes.length)) {
      const got = await s3.send(new GetObjectCommand({ Bucket: f.cred.bucket, Key: "big/photo.jpg", Range: header }));
      expect(got.ContentRange).toBe(`bytes ${start}-${end}/${bytes.length}`);
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(bytes.subarray(start, end + 1))).toBe(true);
    }
    const whole = await s3.send(new GetObjectCommand({ Bucket: f.cred.bucket, Key: "big/photo.jpg" }));
    expect(Buffer.from(await whole.Body!.transformToByteArray()).equals(bytes)).toBe(true);
  }

  test("from the local disk: whole, HEAD and ranges are exact, again and again (never kept in memory)", async () => {
    await expectExact("local", true);
    await expectExact("local, second time", true);
  });

  test("from an encrypted channel: the plaintext, never the stored ciphertext", async () => {
    const enc = await f.admin.json(
      "POST",
      "/api/admin/channels",
      { name: "enc", driver: "local", config: { path: encDir }, encrypted: true, priority: 50 },
      201,
    );
    await waitReplicaState(f.admin, id, enc.id, "done");
    // Remove the plain copies: the encrypted channel is the only source left.
    for (const { storage_key } of queryDb<{ storage_key: string }>(f.server, "SELECT storage_key FROM blobs")) {
      rmSync(join(f.server.dataDir, "storage", storage_key));
    }
    await expectExact("encrypted", false);
  });
});
