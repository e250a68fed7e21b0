/**
 * The server's own check of a signed body: the bytes of a PUT must hash to the x-amz-content-sha256
 * the client signed. A body changed in transit (same length, one byte flipped) is refused with
 * 400 XAmzContentSHA256Mismatch and leaves nothing behind: no object, no row, no staging file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { makeJpeg, sha256 } from "../helpers/images";
import { queryDb } from "../http/channels.helpers";
import { startS3Fixture, type S3Fixture } from "./s3-setup";
import { signedS3 } from "./signed-request";

describe("S3 body integrity", () => {
  let f: S3Fixture;
  let jpeg: Buffer;
  const put = (key: string, opts: Parameters<typeof signedS3>[4]) => signedS3(f.server.base, f.cred, "PUT", `/s3/kura/${key}`, opts);

  beforeAll(async () => {
    f = await startS3Fixture();
    jpeg = await makeJpeg(40, 30, 91);
  });
  afterAll(() => f.server.dispose());

  test("a tampered body is 400 XAmzContentSHA256Mismatch and nothing is stored", async () => {
    const tampered = new Uint8Array(jpeg);
    tampered[tampered.length >> 1]! ^= 0xff;
    const res = await put("tampered.jpg", { body: jpeg, sendInstead: tampered });
    const xml = await res.text();
    expect(res.status).toBe(400);
    expect(xml).toContain("<Code>XAmzContentSHA256Mismatch</Code>");
    expect(xml).toMatch(/<Message>[^<]*[\u4e00-\u9fff]/);

    expect((await signedS3(f.server.base, f.cred, "HEAD", "/s3/kura/tampered.jpg")).status).toBe(404);
    expect(queryDb(f.server, "SELECT id FROM images")).toEqual([]);
    expect(queryDb(f.server, "SELECT id FROM blobs")).toEqual([]);
    expect(listFiles(join(f.server.dataDir, "storage")).filter((p) => p.startsWith("img/"))).toEqual([]);
    expect(readdirSync(join(f.server.dataDir, "tmp"))).toEqual([]);
  });

  test("the untampered body signed the same way is stored byte for byte (the refusal above is about the bytes)", async () => {
    const res = await put("intact.jpg", { body: jpeg });
    expect(res.status).toBe(200);
    const [row] = queryDb<{ sha256: string }>(f.server, "SELECT b.sha256 FROM images i JOIN blobs b ON b.id = i.blob_id WHERE i.object_key = 'intact.jpg'");
    expect(row).toBeDefined();
    const got = await signedS3(f.server.base, f.cred, "GET", "/s3/kura/intact.jpg");
    expect(got.status).toBe(200);
    expect(sha256(await got.arrayBuffer())).toBe(row!.sha256);
  });
});
