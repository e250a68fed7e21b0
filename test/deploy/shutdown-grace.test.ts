/**
 * A graceful stop waits for in-flight requests only so long (ops audit L3): a stalled upload kept
 * the process alive for up to two minutes with its port already closed, past the unit's
 * TimeoutStopSec=60, so systemd killed it before the access counters were flushed and the WAL
 * checkpointed. After the grace (20 s; 1 s here through KURA_TEST_SHUTDOWN_GRACE_MS) the remaining
 * connections are cut and the stop completes.
 */
import { expect, test } from "bun:test";
import { FakeDav } from "../channels/fakes/webdav";
import { adminSession } from "../helpers/client";
import { KuraServer } from "../helpers/server";
import { RawRequest } from "../http/raw-upload.helpers";

test("SIGTERM with a stalled upload in flight: the connection is cut after the grace and the stop completes", async () => {
  const server = await KuraServer.start({ env: { KURA_TEST_SHUTDOWN_GRACE_MS: "1000" } });
  try {
    const admin = await adminSession(server);
    const head = [
      "POST /api/admin/upload HTTP/1.1",
      `Host: ${new URL(server.base).host}`,
      `Cookie: ${admin.cookie}`,
      `X-CSRF-Token: ${admin.csrf}`,
      "Content-Type: multipart/form-data; boundary=grace",
      "Content-Length: 1000000",
    ].join("\r\n");
    // A part header and a few bytes, then nothing: the upload's idle deadline is a minute away.
    const upload = await RawRequest.open(server, head, '--grace\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n\x89PNG');
    await Bun.sleep(300);
    const started = Date.now();
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(10_000);
    expect(server.logs).toMatch(/level=WARN msg=仍有请求未完成，已强制关闭连接 grace_ms=1000/);
    expect(server.logs).toContain("msg=已关闭");
    expect(await upload.answer).toBeNull();
  } finally {
    await server.dispose();
  }
});

test("SIGTERM while a background round waits on a hung channel: the stop ends within its bound, not the channel's timeout", async () => {
  const dav = new FakeDav();
  // The bound is 25 s (1.5 s here); the channel's own timeout two minutes, twice in a health round.
  const server = await KuraServer.start({ env: { KURA_TEST_BACKGROUND_STOP_MS: "1500", KURA_CHANNEL_TIMEOUT_MS: "120000" } });
  try {
    const admin = await adminSession(server);
    const config = { url: dav.url, vendor: "other", bearer_token: "dav-token" };
    await admin.json("POST", "/api/admin/channels", { name: "dav", driver: "webdav", config, priority: 10 }, 201);
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
    dav.hangAll = true;
    await Bun.sleep(2_500); // a health round has begun and waits on the hung server
    const started = Date.now();
    server.proc.kill("SIGTERM");
    expect(await server.proc.exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(server.logs).toMatch(/level=WARN msg=后台任务未能及时结束，不再等待 wait_ms=1500/);
    expect(server.logs).toContain("msg=已关闭");
  } finally {
    await server.dispose();
    dav.stop();
  }
}, 60_000);

test("a stop whose last checkpoint meets a reader says kura.db alone is not the whole database; a plain stop leaves one file", async () => {
  const { Database } = await import("bun:sqlite");
  const { existsSync, statSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { form, makePng } = await import("../helpers/images");
  const walBytes = (dir: string) => (existsSync(join(dir, "kura.db-wal")) ? statSync(join(dir, "kura.db-wal")).size : 0);

  const server = await KuraServer.start();
  const admin = await adminSession(server);
  // Another process in a read transaction (an `sqlite3` shell, a backup tool) from before an upload until the service has stopped.
  const reader = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  reader.exec("BEGIN");
  reader.query("SELECT count(*) FROM images").get();
  try {
    expect((await admin.request("POST", "/api/admin/upload", form(await makePng(20, 20, 1)))).status).toBe(200);
    expect(await server.stop()).toBe(0);
    const warned =
      /level=WARN msg="关闭时 WAL 未能完全合并：仍有其他连接在读取数据库。复制数据库时请连同 kura\.db-wal 一起复制（下次启动时自动合并）" frames=(\d+) merged=(\d+)/.exec(
        server.logs,
      );
    expect(warned).not.toBeNull();
    expect(Number(warned![2])).toBeLessThan(Number(warned![1]));
    expect(walBytes(server.dataDir)).toBeGreaterThan(0);
  } finally {
    reader.exec("COMMIT");
    reader.close();
  }

  const again = await KuraServer.start({ dataDir: server.dataDir });
  try {
    expect(await again.stop()).toBe(0);
    expect(again.logs).not.toMatch(/WAL 未能完全合并/);
    expect(walBytes(server.dataDir)).toBe(0);
  } finally {
    await server.dispose();
  }
}, 60_000);
