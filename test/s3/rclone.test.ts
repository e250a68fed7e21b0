/** The /s3/ surface driven by the real rclone (S3 backend, provider Other, path style) against a real Kura. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeJpeg, noisePng, sha256 } from "../helpers/images";
import { startS3Fixture, writeRcloneS3Config, type S3Fixture } from "./s3-setup";

describe("S3 surface with rclone", () => {
  let f: S3Fixture;
  let dir: string;
  let config: string;

  /** rclone with only our config: AWS_CA_BUNDLE breaks rclone 1.60's S3 remotes, RCLONE_* could override the config. */
  async function rclone(args: string[], stdin?: Uint8Array): Promise<{ code: number; out: Buffer; err: string }> {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "AWS_CA_BUNDLE" && !k.startsWith("RCLONE_")) env[k] = v;
    const proc = Bun.spawn(["rclone", "--config", config, "--retries", "1", "--low-level-retries", "1", ...args], {
      env,
      stdin: stdin ? new Blob([new Uint8Array(stdin)]) : "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text()]);
    return { code: await proc.exited, out: Buffer.from(out), err };
  }
  const ok = async (args: string[], stdin?: Uint8Array) => {
    const r = await rclone(args, stdin);
    if (r.code !== 0) throw new Error(`rclone ${args.join(" ")} failed (${r.code}):\n${r.err}\n${f.server.logs.slice(-3000)}`);
    return r;
  };
  const imageCount = async () => (await f.admin.json("GET", "/api/admin/images?page_size=1")).total as number;

  beforeAll(async () => {
    f = await startS3Fixture();
    dir = mkdtempSync(join(tmpdir(), "kura-rclone-"));
    config = join(dir, "rclone.conf");
    writeRcloneS3Config(f, config);
  });
  afterAll(async () => {
    await f.server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("copyto uploads (MD5 ETag accepted), a second copyto is a no-op, cat returns the bytes, /o/ serves them", async () => {
    const jpeg = await makeJpeg(80, 60, 21);
    const local = join(dir, "small.jpg");
    writeFileSync(local, jpeg);
    const first = await ok(["copyto", "-v", local, "k:kura/2026/a.jpg"]);
    expect(first.err).toMatch(/Copied \(new\)/);
    expect(first.err).not.toMatch(/corrupted|ERROR/);
    const count = await imageCount();
    const second = await ok(["copyto", "-v", local, "k:kura/2026/a.jpg"]);
    expect(second.err).not.toMatch(/Copied|ERROR/);
    expect(await imageCount()).toBe(count);
    const cat = await ok(["cat", "k:kura/2026/a.jpg"]);
    expect(sha256(cat.out)).toBe(sha256(jpeg));
    const served = await fetch(`${f.cred.url_prefix}2026/a.jpg`);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(jpeg));
  });

  test("lsf lists one level (ListObjects v1 with delimiter), lsf -R lists every key, deletefile removes one", async () => {
    const jpeg = await makeJpeg(40, 40, 22);
    const local = join(dir, "b.jpg");
    writeFileSync(local, jpeg);
    await ok(["copyto", local, "k:kura/top.jpg"]);
    await ok(["copyto", local, "k:kura/2026/11/b.jpg"]);
    expect((await ok(["lsf", "k:kura"])).out.toString().trim().split("\n").sort()).toEqual(["2026/", "top.jpg"]);
    const all = (await ok(["lsf", "-R", "--files-only", "k:kura"])).out.toString().trim().split("\n").sort();
    expect(all).toEqual(["2026/11/b.jpg", "2026/a.jpg", "top.jpg"]);
    // One key per page: pagination by marker / NextMarker (a common prefix must not repeat its keys).
    const paged = (await ok(["lsf", "-R", "--files-only", "--s3-list-chunk", "1", "k:kura"])).out.toString().trim().split("\n").sort();
    expect(paged).toEqual(all);
    expect((await ok(["lsf", "--s3-list-chunk", "1", "k:kura"])).out.toString().trim().split("\n").sort()).toEqual(["2026/", "top.jpg"]);
    await ok(["deletefile", "k:kura/top.jpg"]);
    expect((await ok(["lsf", "k:kura"])).out.toString().trim().split("\n")).toEqual(["2026/"]);
    expect((await fetch(`${f.cred.url_prefix}top.jpg`)).status).toBe(404);
  });

  test("rcat of more than 100 KiB streams as a multipart upload of unknown size", async () => {
    const png = await noisePng(220);
    expect(png.length).toBeGreaterThan(100 * 1024);
    const r = await ok(["rcat", "-vv", "k:kura/stream/big.png"], png);
    expect(r.err).toMatch(/multipart upload starting/i);
    const cat = await ok(["cat", "k:kura/stream/big.png"]);
    expect(sha256(cat.out)).toBe(sha256(png));
  });

  // HEAD now answers the multipart ETag (as S3 does), which is no MD5: rclone 1.60 must verify the bytes by the
  // md5chksum metadata it sent instead, and find the file unchanged on the next run.
  test("copyto in 5 MiB chunks (multipart): rclone verifies the MD5 although HEAD answers the multipart ETag; a second copyto is a no-op", async () => {
    const png = await noisePng(2000);
    expect(png.length).toBeGreaterThan(10 * 1024 * 1024);
    const local = join(dir, "chunked.png");
    writeFileSync(local, png);
    const chunked = ["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"];
    const first = await ok(["copyto", "-vv", ...chunked, local, "k:kura/chunked/c.png"]);
    expect(first.err).toMatch(/multipart upload starting/i);
    expect(first.err).toMatch(/md5 = [0-9a-f]{32} OK/);
    expect(first.err).not.toMatch(/corrupted|ERROR/);
    const count = await imageCount();
    const second = await ok(["copyto", "-v", ...chunked, local, "k:kura/chunked/c.png"]);
    expect(second.err).not.toMatch(/Copied|ERROR/);
    expect(await imageCount()).toBe(count);
    expect(sha256((await ok(["cat", "k:kura/chunked/c.png"])).out)).toBe(sha256(png));
  });
});
