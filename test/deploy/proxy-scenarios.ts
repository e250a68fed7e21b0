/**
 * What a reverse proxy built from deploy/ must get right, proved end to end through a
 * real proxy process in front of a real Kura started as deploy/kura.service configures it
 * (KURA_TRUSTED_PROXIES = the proxy's address). Shared by the nginx and Caddy tests.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { adminSession } from "../helpers/client";
import { makeJpeg, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import type { RunningProxy } from "./proxies";

const ADMIN_PASSWORD = "deploy-admin-pass-1";

/** A real, incompressible ~15 MB PNG (stored uncompressed so making it is cheap). */
async function fifteenMegabytePng(): Promise<Buffer> {
  const width = 2300;
  const height = 2200;
  const raw = Buffer.alloc(width * height * 3);
  let x = 0x9e3779b9;
  for (let i = 0; i < raw.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    raw[i] = x & 0xff;
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();
}

/** curl from a chosen loopback source address, so the proxy sees distinct clients. */
async function curl(proxy: RunningProxy, from: string, path: string, args: string[] = []): Promise<{ status: number; body: string }> {
  const proc = Bun.spawn(
    ["curl", "-sS", "--max-time", "30", "--cacert", proxy.caFile, "--interface", from, "-o", "-", "-w", "\n%{http_code}", ...args, proxy.origin + path],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if ((await proc.exited) !== 0) throw new Error(`curl failed: ${err}`);
  const cut = out.lastIndexOf("\n");
  return { status: Number(out.slice(cut + 1)), body: out.slice(0, cut) };
}

const loginArgs = (password: string) => ["-H", "content-type: application/json", "--data", JSON.stringify({ name: "admin", password })];

export function proxyScenarios(name: string, startProxy: (backendPort: number) => Promise<RunningProxy>) {
  let server: KuraServer;
  let proxy: RunningProxy;
  let ca: string;
  let dir: string;
  /** Session through the proxy: cookie + CSRF token. */
  let cookie = "";
  let csrf = "";
  let token = "";
  let tokenId = 0;
  let loginSetCookie = "";

  const viaProxy = (path: string, init: RequestInit = {}) => fetch(proxy.origin + path, { ...init, tls: { ca }, redirect: "manual" } as RequestInit);
  const admin = (method: string, path: string, body?: unknown) =>
    viaProxy(path, {
      method,
      headers: { cookie, "x-csrf-token": csrf, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  beforeAll(async () => {
    server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1,::1" } });
    await adminSession(server, ADMIN_PASSWORD);
    proxy = await startProxy(Number(new URL(server.base).port));
    ca = readFileSync(proxy.caFile, "utf8");
    dir = mkdtempSync(join(tmpdir(), `kura-deploy-${name}-`));
    const login = await viaProxy("/api/admin/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "admin", password: ADMIN_PASSWORD }),
    });
    expect(login.status).toBe(200);
    loginSetCookie = login.headers.get("set-cookie") ?? "";
    cookie = loginSetCookie.split(";")[0]!;
    csrf = ((await login.json()) as { csrf_token: string }).csrf_token;
    const created = await admin("POST", "/api/admin/tokens", { name: `${name}-deploy` });
    expect(created.status).toBe(201);
    const issued = (await created.json()) as { id: number; token: string };
    token = issued.token;
    tokenId = issued.id;
  }, 90_000);

  afterAll(async () => {
    await proxy?.dispose();
    await server?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test(`${name}: HTTPS is seen by Kura (X-Forwarded-Proto): the session cookie is Secure`, () => {
    expect(loginSetCookie).toMatch(/;\s*Secure/i);
  });

  test(`${name}: a 15 MB upload passes the proxy's body limit, streamed, and the returned URL is on the public address`, async () => {
    const png = await fifteenMegabytePng();
    expect(png.length).toBeGreaterThan(15_000_000);
    const fd = new FormData();
    fd.append("exif_policy", "passthrough");
    fd.append("file", new Blob([new Uint8Array(png)], { type: "image/png" }), "big.png");
    const res = await viaProxy("/api/upload", { method: "POST", headers: { authorization: `Bearer ${token}` }, body: fd });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const { url } = JSON.parse(text) as { url: string };
    expect(url.startsWith(`${proxy.origin}/i/`)).toBe(true);
    const served = await fetch(url, { tls: { ca } } as RequestInit);
    expect(served.status).toBe(200);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(png));
    // nginx says so in its error log when it spools a request body to disk instead of streaming it
    // (a large *response* may be spooled too — "an upstream response is buffered" — which is not this).
    expect(proxy.logs()).not.toMatch(/client request body is buffered/);
  }, 120_000);

  test(`${name}: rclone copyto and check through the proxy (the signed Host is the one Kura verifies)`, async () => {
    const credRes = await admin("POST", `/api/admin/tokens/${tokenId}/s3-credential`);
    expect(credRes.status).toBe(200);
    const cred = (await credRes.json()) as { access_key_id: string; secret_access_key: string; endpoint: string; region: string; url_prefix: string };
    const config = join(dir, "rclone.conf");
    writeFileSync(
      config,
      [
        "[k]",
        "type = s3",
        "provider = Other",
        `access_key_id = ${cred.access_key_id}`,
        `secret_access_key = ${cred.secret_access_key}`,
        `endpoint = ${proxy.origin}/s3`,
        `region = ${cred.region}`,
        "force_path_style = true",
        "",
      ].join("\n"),
      { mode: 0o600 },
    );
    const local = join(dir, "photos");
    const jpeg = await makeJpeg(640, 480, 77);
    await Bun.write(join(local, "a.jpg"), jpeg);
    const rclone = async (args: string[]) => {
      // AWS_CA_BUNDLE breaks rclone's S3 remotes; RCLONE_* could override the config.
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "AWS_CA_BUNDLE" && !k.startsWith("RCLONE_")) env[k] = v;
      const proc = Bun.spawn(["rclone", "--config", config, "--ca-cert", proxy.caFile, "--retries", "1", "--low-level-retries", "1", ...args], {
        env,
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      return { code: await proc.exited, out, err };
    };
    const copied = await rclone(["copyto", "-v", join(local, "a.jpg"), "k:kura/deploy/a.jpg"]);
    expect(copied.code, copied.err + server.logs.slice(-2000)).toBe(0);
    expect(copied.err).toMatch(/Copied \(new\)/);
    const checked = await rclone(["check", local, "k:kura/deploy"]);
    expect(checked.code, checked.err).toBe(0);
    expect(checked.err).toMatch(/0 differences found/);
    expect(checked.err).toMatch(/1 matching files/);
    // The credential shown to the user names the public address, not the backend port.
    expect(cred.endpoint).toBe(`${proxy.origin}/s3`);
    expect(cred.url_prefix.startsWith(`${proxy.origin}/o/`)).toBe(true);
    const served = await fetch(`${cred.url_prefix}deploy/a.jpg`, { tls: { ca } } as RequestInit);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(jpeg));
  }, 120_000);

  test(`${name}: an upload over max_upload_mb gets Kura's 413 through the proxy every time (no 502, no broken stream), over HTTP/1.1 and HTTP/2`, async () => {
    const png = await fifteenMegabytePng();
    const file = join(dir, "over.png");
    writeFileSync(file, png);
    expect((await admin("PUT", "/api/admin/config", { max_upload_mb: 5 })).status).toBe(200);
    try {
      const outcomes: string[] = [];
      for (const version of ["--http1.1", "--http2"]) {
        for (let i = 0; i < 4; i++) {
          const args = [version, "-H", `authorization: Bearer ${token}`, "-F", `file=@${file};type=image/png`];
          const res = await curl(proxy, "127.0.0.4", "/api/upload", args).catch((err: Error) => ({ status: 0, body: err.message }));
          outcomes.push(`${version} ${res.status} ${res.body.includes("图片超过大小上限") ? "kura-message" : res.body.slice(0, 80)}`);
        }
      }
      expect(outcomes).toEqual([...Array(4).fill("--http1.1 413 kura-message"), ...Array(4).fill("--http2 413 kura-message")]);
    } finally {
      expect((await admin("PUT", "/api/admin/config", { max_upload_mb: 20 })).status).toBe(200);
    }
  }, 120_000);

  test(`${name}: /metrics is closed to the outside, open to a local scraper`, async () => {
    expect((await curl(proxy, "127.0.0.2", "/metrics")).status).toBe(404);
    // Kura's router answers /metrics/ too (strictPath off): the proxy closes that spelling as well.
    expect((await curl(proxy, "127.0.0.2", "/metrics/")).status).toBe(404);
    // Kura itself resolves the real client behind its trusted proxy: a public client is refused.
    const spoofed = await fetch(server.url("/metrics"), { headers: { "x-forwarded-for": "203.0.113.9" } });
    expect(spoofed.status).toBe(403);
    expect((await fetch(server.url("/metrics"))).status).toBe(200);
  });

  test(`${name}: login rate limit counts each real client address, and a forged X-Forwarded-For does not move a client`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await curl(proxy, "127.0.0.2", "/api/admin/auth/login", loginArgs("wrong-password"))).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses[5]).toBe(429);
    // Another client is not punished for the first one's failures…
    expect((await curl(proxy, "127.0.0.3", "/api/admin/auth/login", loginArgs("wrong-password"))).status).toBe(401);
    // …and cannot step into (or out of) a bucket by sending its own X-Forwarded-For.
    const forged = await curl(proxy, "127.0.0.3", "/api/admin/auth/login", [...loginArgs("wrong-password"), "-H", "x-forwarded-for: 127.0.0.2"]);
    expect(forged.status).toBe(401);
    const spoofed = await curl(proxy, "127.0.0.2", "/api/admin/auth/login", [...loginArgs(ADMIN_PASSWORD), "-H", "x-forwarded-for: 198.51.100.7"]);
    expect(spoofed.status).toBe(429);
    // A correct setup never triggers the missing-KURA_TRUSTED_PROXIES hint.
    expect(server.logs).not.toMatch(/KURA_TRUSTED_PROXIES/);
  });
}
