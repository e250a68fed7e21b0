/**
 * PicGo core with picgo-plugin-s3 on the /s3/ endpoint, configured as the console's S3 dialog and
 * the README give it: path style, the link built by `outputURLPattern` from the SDK's encoded
 * request path. The plugin's deprecated `urlPrefix` appends the raw key, so a key with `#`, `?`,
 * `%` or a space gave a link that answered 404 (audit LOW-11).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PicGo } from "picgo";
import s3Plugin from "picgo-plugin-s3";
import { picgoS3Snippet, picgoS3UrlPattern } from "../../src/console/app/snippets";
import type { S3Credential } from "../../src/console/app/types";
import { makePng } from "../helpers/images";
import { sha256, startClientFixture, type ClientFixture } from "./fixture";

describe("PicGo + picgo-plugin-s3 with outputURLPattern", () => {
  let f: ClientFixture;
  let cred: S3Credential;
  beforeAll(async () => {
    f = await startClientFixture();
    const token = await f.admin.json("POST", "/api/admin/tokens", { name: "picgo-s3" }, 201);
    cred = await f.admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  });
  afterAll(async () => {
    await f.dispose();
  });

  /** Uploads `file` with the console's snippet, `uploadPath` changed to keep the file name in the key. */
  async function upload(file: string, uploadPath: string): Promise<string> {
    const config = JSON.parse(picgoS3Snippet(cred)).picBed["aws-s3"];
    const picgo = new PicGo(join(f.dir, `picgo-${Date.now()}.json`));
    picgo.use(s3Plugin as never, "aws-s3");
    picgo.setConfig({ "picBed.uploader": "aws-s3", "picBed.current": "aws-s3", "picBed.aws-s3": { ...config, uploadPath } });
    const out = (await picgo.upload([file])) as { imgUrl?: string; error?: Error }[];
    expect(out.length).toBe(1);
    expect(out[0]!.error).toBeUndefined();
    return out[0]!.imgUrl!;
  }

  test("the snippet's pattern strips the endpoint's path and the bucket, with the flag the plugin needs", () => {
    expect(picgoS3UrlPattern(cred)).toBe(`${cred.url_prefix}{path:/^s3.kura./i,''}`);
    // Kura under a path prefix (base_url with a path): every segment of the endpoint's path goes.
    const prefixed = { endpoint: "https://example.com/img.host/s3", bucket: "kura", url_prefix: "https://example.com/img.host/o/u1/" };
    expect(picgoS3UrlPattern(prefixed)).toBe("https://example.com/img.host/o/u1/{path:/^img.host.s3.kura./i,''}");
  });

  test("a key with #, ?, % and a space: the printed link is the encoded /o/ alias and serves the bytes", async () => {
    const png = await makePng(40, 30, 51);
    const file = join(f.dir, "a #1 100% b?.png");
    writeFileSync(file, png);
    const url = await upload(file, "odd/{fileName}/{md5:8}.{extName}");
    const md5 = new Bun.CryptoHasher("md5").update(png).digest("hex");
    const key = `odd/a #1 100% b?/${md5.slice(0, 8)}.png`;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(sha256(await res.arrayBuffer())).toBe(sha256(png));
    expect(url).toBe(cred.url_prefix + key.split("/").map(encodeURIComponent).join("/"));
  });

  test("%41 in a name stays three characters: the link does not decode to another key", async () => {
    const png = await makePng(24, 24, 52);
    const file = join(f.dir, "pct%41.png");
    writeFileSync(file, png);
    const url = await upload(file, "odd4/{fileName}.{extName}");
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(sha256(await res.arrayBuffer())).toBe(sha256(png));
    expect(url).toBe(`${cred.url_prefix}odd4/pct%2541.png`);
  });
});
