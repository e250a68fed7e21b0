/** The /s3/ surface driven by the real PicGo core with picgo-plugin-s3, configured as the README says. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PicGo } from "picgo";
import s3Plugin from "picgo-plugin-s3";
import { makeJpeg, sha256 } from "../helpers/images";
import { startS3Fixture, type S3Fixture } from "./s3-setup";

describe("S3 surface with PicGo + picgo-plugin-s3", () => {
  let f: S3Fixture;
  let dir: string;
  beforeAll(async () => {
    f = await startS3Fixture();
    dir = mkdtempSync(join(tmpdir(), "kura-picgo-"));
  });
  afterAll(async () => {
    await f.server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("one upload returns a working /o/ URL serving the same bytes", async () => {
    const jpeg = await makeJpeg(72, 48, 31);
    const file = join(dir, "photo.jpg");
    writeFileSync(file, jpeg);
    const picgo = new PicGo(join(dir, "picgo.json"));
    picgo.use(s3Plugin as never, "aws-s3");
    picgo.setConfig({
      "picBed.uploader": "aws-s3",
      "picBed.current": "aws-s3",
      "picBed.aws-s3": {
        accessKeyID: f.cred.access_key_id,
        secretAccessKey: f.cred.secret_access_key,
        bucketName: f.cred.bucket,
        uploadPath: "{year}/{md5}.{extName}",
        region: f.cred.region,
        endpoint: f.cred.endpoint,
        pathStyleAccess: true,
        urlPrefix: f.cred.url_prefix.replace(/\/$/, ""),
        disableBucketPrefixToURL: true,
      },
    });
    const out = (await picgo.upload([file])) as { imgUrl?: string; error?: Error }[];
    expect(out.length).toBe(1);
    expect(out[0]!.error).toBeUndefined();
    const url = out[0]!.imgUrl!;
    const md5 = new Bun.CryptoHasher("md5").update(jpeg).digest("hex");
    expect(url).toBe(`${f.cred.url_prefix}${new Date().getFullYear()}/${md5}.jpg`);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/jpeg");
    expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(jpeg));
  });
});
