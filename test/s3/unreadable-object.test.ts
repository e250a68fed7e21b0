/**
 * Every copy of an image gone from its channels (files deleted behind Kura's back): a dependency
 * that cannot serve, answered as a 503 on each surface that reads the bytes, never as a crash.
 * S3's GetObject answered 500 InternalError and logged "请求处理失败" before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { makePng } from "../helpers/images";
import { errorCodeOf, errorMessageOf, type S3Fixture, signedRequest, startS3Fixture } from "./s3-setup";

const UNREADABLE = "没有可读取该图片的健康存储渠道";

describe("an image none of whose channels can give its bytes", () => {
  let f: S3Fixture;
  let imageId = "";
  beforeAll(async () => {
    f = await startS3Fixture();
    const put = await signedRequest(f, "PUT", "/s3/kura/gone/a.png", { body: await makePng(50, 40, 5) });
    expect(put.status).toBe(200);
    imageId = (await f.admin.json("GET", "/api/admin/images")).items[0].id;
    // The only copy, on the default local channel, removed behind Kura's back.
    const storage = join(f.server.dataDir, "storage");
    const files = listFiles(storage).filter((p) => p.startsWith("img/"));
    expect(files).toHaveLength(1);
    rmSync(join(storage, files[0]!));
  });
  afterAll(() => f.server.dispose());

  test("S3 GetObject: 503 ServiceUnavailable saying so, not a logged 500", async () => {
    for (const headers of [{}, { range: "bytes=0-9" }] as Record<string, string>[]) {
      const res = await signedRequest(f, "GET", "/s3/kura/gone/a.png", { headers });
      expect(res.status).toBe(503);
      const xml = await res.text();
      expect([errorCodeOf(xml), errorMessageOf(xml)]).toEqual(["ServiceUnavailable", UNREADABLE]);
    }
    expect(f.server.logs).not.toMatch(/请求处理失败/);
  });

  test("/i/ delivery, the original and a variant: the same 503 as plain text", async () => {
    for (const path of [`/i/${imageId}`, `/i/${imageId}?format=webp`]) {
      const res = await fetch(f.server.url(path));
      expect([res.status, await res.text()]).toEqual([503, UNREADABLE]);
    }
  });
});
