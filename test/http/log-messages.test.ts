/**
 * Log lines an operator reads say what failed in Chinese, in `msg` and in the reason: an alert
 * webhook whose receiver is down is "连接被拒绝", not Bun's "ECONNREFUSED" / "Unable to connect.
 * Is the computer able to access the url?". And nothing but log lines reaches the log: a URL
 * import whose server sends a body that does not decompress no longer has Bun print
 * "Decompression error: ZlibError" among them.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { expectUserMessage } from "../helpers/messages";

/** A loopback port nothing listens on (taken, then released). */
function closedPort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

const { server, admin } = useAdmin({
  env: { KURA_WEBHOOK_ALLOW: "127.0.0.1/32", KURA_IMPORT_ALLOW: "127.0.0.1/32", KURA_CDN_API_BASE: `http://127.0.0.1:${closedPort()}/client/v4` },
});
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  for (const dir of dirs) rmSync(`${dir}.away`, { recursive: true, force: true });
});

test("an alert webhook nobody listens on: the retry line names the refusal in Chinese", async () => {
  await admin.json("PUT", "/api/admin/config", { alert_webhook_url: `http://127.0.0.1:${closedPort()}/hook`, health_check_seconds: 1 });
  // A local channel whose directory becomes a file opens a channel_unhealthy alert.
  const dir = mkdtempSync(join(tmpdir(), "kura-log-hook-"));
  dirs.push(dir);
  const ch = await admin.json("POST", "/api/admin/channels", { name: "shaky", driver: "local", config: { path: dir } }, 201);
  renameSync(dir, `${dir}.away`);
  writeFileSync(dir, "not a directory");
  await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
  const line = await server.waitForLog(/level=WARN msg=(\S+) kind=channel_unhealthy target=shaky status=open err=("[^"]*"|\S+)/, 15_000);
  expect(line[1]).toBe("告警通知发送失败，将在下一轮重试");
  expect(line[2]).toBe("连接被拒绝");
  expectUserMessage(line[2]!);
});

test("a URL import answered with a gzip body that does not decode: a Chinese 400 and no stray line in the log", async () => {
  const jpeg = await makeJpeg(24, 16, 9);
  const source = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) =>
      new URL(req.url).pathname === "/broken.jpg"
        ? new Response("this is not gzip at all", { headers: { "content-type": "image/jpeg", "content-encoding": "gzip" } })
        : new Response(gzipSync(jpeg), { headers: { "content-type": "image/jpeg", "content-encoding": "gzip" } }),
  });
  try {
    const res = await admin.request("POST", "/api/admin/upload/url", { url: `http://127.0.0.1:${source.port}/broken.jpg` });
    expect(res.status).toBe(400);
    expectUserMessage((await res.json()).error);
    // A server that compresses despite `accept-encoding: identity` is still understood.
    const ok = await admin.json("POST", "/api/admin/upload/url", { url: `http://127.0.0.1:${source.port}/fine.jpg` });
    const served = Buffer.from(await (await fetch(server.url(`/i/${ok.id}`))).arrayBuffer());
    expect(served.equals(jpeg)).toBe(true);
    // Every line of the server's output is a log line.
    expect(server.logs.split("\n").filter((l) => l !== "" && !l.startsWith("time="))).toEqual([]);
  } finally {
    source.stop(true);
  }
});

test("a CDN purge whose API does not answer: the job's retry line names the refusal in Chinese", async () => {
  await admin.json("PUT", "/api/admin/config", { base_url: "https://img.example.com", cdn_provider_zone_id: "zone", cdn_provider_api_token: "token" });
  const up = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 14, 11), "purged.jpg"));
  await admin.json("DELETE", `/api/admin/images/${up.id}`, undefined, 204);
  const line = await server.waitForLog(/level=WARN msg=(\S+) .*kind=cdn\.purge.* err=("[^"]*"|\S+)/, 15_000);
  expect(line[1]).toBe("任务失败，稍后重试");
  expect(line[2]).toBe('"CDN 刷新请求失败：连接被拒绝"');
  expectUserMessage(line[2]!);
});
