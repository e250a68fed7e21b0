/**
 * s3cmd cannot put a path in its endpoint (`host_base` is a host), so it reaches `/s3/` through a proxy
 * that maps a host's root onto `/s3` and keeps the Host header (what the README tells operators to
 * configure). s3cmd signs the path it sent (`/kura/…`); Kura accepts that signature for `/s3/kura/…`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeJpeg, sha256 } from "../helpers/images";
import { startS3Fixture, type S3Fixture } from "./s3-setup";

describe("s3cmd through a root-to-/s3 proxy", () => {
  let f: S3Fixture;
  let proxy: ReturnType<typeof Bun.serve>;
  let dir: string;
  let config: string;

  async function s3cmd(args: string[]): Promise<{ code: number; out: string; err: string }> {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("AWS_") && !k.startsWith("S3CMD")) env[k] = v;
    const proc = Bun.spawn(["s3cmd", "-c", config, ...args], { env: { ...env, HOME: dir }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code: await proc.exited, out, err };
  }

  beforeAll(async () => {
    f = await startS3Fixture();
    const upstream = new URL(f.server.base);
    // Like nginx `location / { proxy_pass http://kura/s3/; proxy_set_header Host $host; }`.
    proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(req) {
        const url = new URL(req.url);
        const target = `${upstream.origin}/s3${req.url.slice(url.origin.length)}`;
        const res = await fetch(target, {
          method: req.method,
          headers: req.headers,
          body: req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer(),
          redirect: "manual",
          decompress: false,
        } as RequestInit);
        return new Response(req.method === "HEAD" ? null : res.body, { status: res.status, headers: res.headers });
      },
    });
    dir = mkdtempSync(join(tmpdir(), "kura-s3cmd-"));
    config = join(dir, "s3cfg");
    writeFileSync(
      config,
      [
        "[default]",
        `access_key = ${f.cred.access_key_id}`,
        `secret_key = ${f.cred.secret_access_key}`,
        `host_base = 127.0.0.1:${proxy.port}`,
        `host_bucket = 127.0.0.1:${proxy.port}`,
        "use_https = False",
        `bucket_location = ${f.cred.region}`,
        "signature_v2 = False",
        "",
      ].join("\n"),
      { mode: 0o600 },
    );
  });
  afterAll(async () => {
    proxy?.stop(true);
    await f.server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("put, ls, get and del work; the object is the /o/ alias", async () => {
    const jpeg = await makeJpeg(50, 40, 31);
    const local = join(dir, "a.jpg");
    writeFileSync(local, jpeg);
    const put = await s3cmd(["put", local, "s3://kura/cmd/a.jpg"]);
    expect(put.code, put.err).toBe(0);
    const served = await fetch(`${f.cred.url_prefix}cmd/a.jpg`);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(jpeg));
    const ls = await s3cmd(["ls", "s3://kura/cmd/"]);
    expect(ls.code, ls.err).toBe(0);
    expect(ls.out).toContain("s3://kura/cmd/a.jpg");
    const back = join(dir, "back.jpg");
    const get = await s3cmd(["get", "s3://kura/cmd/a.jpg", back]);
    expect(get.code, get.err).toBe(0);
    expect(sha256(readFileSync(back))).toBe(sha256(jpeg));
    const del = await s3cmd(["del", "s3://kura/cmd/a.jpg"]);
    expect(del.code, del.err).toBe(0);
    expect((await fetch(`${f.cred.url_prefix}cmd/a.jpg`)).status).toBe(404);
    const wrong = await s3cmd(["ls", "s3://photos/"]);
    expect(wrong.code).not.toBe(0);
    expect(wrong.err).toContain("NoSuchBucket");
  });
});
