import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectError, type Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";

interface Hit {
  path: string;
  body: string;
  authorization: string | null;
}

/** A loopback HTTP endpoint recording every request; `answer` decides the response. */
function endpoint(answer: (req: Request) => Response = () => new Response("ok")) {
  const hits: Hit[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      hits.push({ path: new URL(req.url).pathname, body: await req.text(), authorization: req.headers.get("authorization") });
      return answer(req);
    },
  });
  return { hits, base: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

/** Opens a channel_unhealthy alert: a local channel whose directory becomes a file. */
async function breakAChannel(admin: Session, name: string, dirs: string[]) {
  const dir = mkdtempSync(join(tmpdir(), "kura-hook-"));
  dirs.push(dir);
  const ch = await admin.json("POST", "/api/admin/channels", { name, driver: "local", config: { path: dir } }, 201);
  renameSync(dir, `${dir}.away`);
  writeFileSync(dir, "not a directory");
  await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
}

describe("row 6: the alert webhook follows the public-address policy", () => {
  const dirs: string[] = [];
  const stops: (() => void)[] = [];
  afterEach(() => {
    for (const stop of stops.splice(0)) stop();
  });
  afterAll(() => {
    for (const d of dirs) {
      rmSync(d, { recursive: true, force: true });
      rmSync(`${d}.away`, { recursive: true, force: true });
    }
  });

  describe("without an allow list", () => {
    const { server, admin } = useAdmin();

    test("a loopback webhook is refused (no blind SSRF), and the audit keeps only where it points", async () => {
      const inside = endpoint();
      stops.push(inside.stop);
      const url = `http://127.0.0.1:${new URL(inside.base).port}/internal/admin?token=secret-in-query`;
      await admin.json("PUT", "/api/admin/config", { alert_webhook_url: url, health_check_seconds: 1 });
      await breakAChannel(admin, "ssrf", dirs);
      await server.waitForLog(/msg=告警通知发送失败.*target=ssrf.*err=.*公网/, 15_000);
      await Bun.sleep(1500); // another round or two
      expect(inside.hits).toEqual([]);

      const audit = await admin.json("GET", "/api/admin/audit?action=config.update");
      const entry = audit.items.find((e: { detail: string }) => e.detail.includes("alert_webhook_url"));
      expect(entry.detail).toContain(`127.0.0.1:${new URL(inside.base).port}/internal/admin`);
      for (const secret of ["secret-in-query", "token="]) expect(entry.detail).not.toContain(secret);
      expect(server.logs).not.toContain("secret-in-query");
    });
  });

  describe("with KURA_WEBHOOK_ALLOW", () => {
    const { server, admin } = useAdmin({ env: { KURA_WEBHOOK_ALLOW: "127.0.0.1/32" } });

    test("an allowed address is delivered to; a redirect is not followed", async () => {
      const elsewhere = endpoint();
      stops.push(elsewhere.stop);
      const redirecting = endpoint(() => new Response(null, { status: 307, headers: { location: `${elsewhere.base}/stolen` } }));
      stops.push(redirecting.stop);
      await admin.json("PUT", "/api/admin/config", { alert_webhook_url: `${redirecting.base}/hook`, health_check_seconds: 1 });
      await breakAChannel(admin, "redirected", dirs);
      await server.waitForLog(/msg=告警通知发送失败.*target=redirected.*err="?HTTP 307/, 15_000);
      expect(redirecting.hits.length).toBeGreaterThan(0);
      expect(JSON.parse(redirecting.hits[0]!.body)).toMatchObject({ target: "redirected", status: "open" });
      await Bun.sleep(1500);
      expect(elsewhere.hits).toEqual([]);

      // The webhook carries no authentication header (spec 5 rule 13): an address with userinfo,
      // which would have been sent as basic auth, is refused; the next allowed receiver gets the
      // pending alert without one.
      const receiver = endpoint();
      stops.push(receiver.stop);
      const port = new URL(receiver.base).port;
      await expectError(await admin.request("PUT", "/api/admin/config", { alert_webhook_url: `http://u:p%40ss@127.0.0.1:${port}/ok` }), 400);
      await admin.json("PUT", "/api/admin/config", { alert_webhook_url: `http://127.0.0.1:${port}/ok` });
      const deadline = Date.now() + 15_000;
      while (!receiver.hits.some((h) => h.body.includes("redirected")) && Date.now() < deadline) await Bun.sleep(100);
      const hit = receiver.hits.find((h) => h.body.includes("redirected"))!;
      expect(hit.path).toBe("/ok");
      expect(hit.authorization).toBeNull();
    });
  });
});
