import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";

interface Received {
  at: number;
  contentType: string | null;
  authorization: string | null;
  body: Record<string, unknown>;
}

/** A real HTTP receiver; `failFirst` answers the first N requests with 500. */
function startReceiver(failFirst = 0) {
  const received: Received[] = [];
  let calls = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      calls++;
      const entry = {
        at: Date.now(),
        contentType: req.headers.get("content-type"),
        authorization: req.headers.get("authorization"),
        body: (await req.json()) as Record<string, unknown>,
      };
      received.push(entry);
      return new Response(calls <= failFirst ? "busy" : "ok", { status: calls <= failFirst ? 500 : 200 });
    },
  });
  return { received, url: `http://127.0.0.1:${server.port}/hook?k=secret-in-query`, stop: () => server.stop(true) };
}

async function waitFor<T>(probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await Bun.sleep(50);
  }
}

const SQL_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

describe("alert webhook (spec 6.1)", () => {
  const dirs: string[] = [];
  let receiver: ReturnType<typeof startReceiver> | undefined;

  // The receiver is on loopback, which the webhook policy refuses unless allowed.
  const { server, admin } = useAdmin({ env: { KURA_WEBHOOK_ALLOW: "127.0.0.1/32" } });
  afterEach(() => receiver?.stop());
  afterAll(async () => {
    for (const d of dirs) {
      rmSync(d, { recursive: true, force: true });
      rmSync(`${d}.away`, { recursive: true, force: true });
    }
  });

  /** A local channel whose directory can be swapped for a file (unhealthy) and back. */
  async function shakyChannel(name: string) {
    const dir = mkdtempSync(join(tmpdir(), "kura-hook-"));
    dirs.push(dir);
    const ch = await admin.json("POST", "/api/admin/channels", { name, driver: "local", config: { path: dir } }, 201);
    return {
      async breakIt() {
        renameSync(dir, `${dir}.away`);
        writeFileSync(dir, "not a directory");
        await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
      },
      async heal() {
        rmSync(dir);
        renameSync(`${dir}.away`, dir);
        await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
      },
    };
  }

  test("open and resolved are POSTed as fixed JSON, open first, without any auth header", async () => {
    receiver = startReceiver();
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: receiver.url, health_check_seconds: 1 });
    const ch = await shakyChannel("hooked");
    await ch.breakIt();
    const open = await waitFor(() => receiver!.received.find((r) => r.body.target === "hooked"));
    expect(open.contentType).toMatch(/^application\/json/);
    expect(open.authorization).toBeNull();
    expect(Object.keys(open.body).sort()).toEqual(["kind", "message", "opened_at", "status", "target"]);
    expect(open.body).toMatchObject({ kind: "channel_unhealthy", target: "hooked", status: "open" });
    expect(open.body.opened_at).toMatch(SQL_TIME);
    expect(open.body.message).toMatch(/[\u4e00-\u9fff]/);

    await ch.heal();
    const resolved = await waitFor(() => receiver!.received.find((r) => r.body.target === "hooked" && r.body.status === "resolved"));
    expect(Object.keys(resolved.body).sort()).toEqual(["kind", "message", "opened_at", "resolved_at", "status", "target"]);
    expect(resolved.body.opened_at).toBe(open.body.opened_at as string);
    expect(resolved.body.resolved_at).toMatch(SQL_TIME);
    expect(receiver.received.indexOf(resolved)).toBeGreaterThan(receiver.received.indexOf(open));
    // Delivered once each: later rounds send nothing more for this alert.
    await Bun.sleep(2500);
    expect(receiver.received.filter((r) => r.body.target === "hooked").map((r) => r.body.status)).toEqual(["open", "resolved"]);
    expect(server.logs).not.toContain("secret-in-query");
  });

  test("a non-2xx answer is retried on the next evaluation round", async () => {
    receiver = startReceiver(1);
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: receiver.url, health_check_seconds: 1 });
    const ch = await shakyChannel("retried");
    await ch.breakIt();
    await waitFor(() => (receiver!.received.filter((r) => r.body.target === "retried").length >= 2 ? true : undefined));
    const [first, second] = receiver.received.filter((r) => r.body.target === "retried");
    expect(first!.body).toEqual(second!.body);
    expect(first!.body.status).toBe("open");
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(500);
    await server.waitForLog(/msg=告警通知发送失败.*target=retried.*err="HTTP 500"/);
    expect(server.logs).not.toContain("secret-in-query");
    await ch.heal();
    await waitFor(() => receiver!.received.find((r) => r.body.target === "retried" && r.body.status === "resolved"));
  });

  test("a transition made while no webhook is configured is never sent later", async () => {
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: "", health_check_seconds: 1 });
    const ch = await shakyChannel("silent");
    await ch.breakIt();
    receiver = startReceiver();
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: receiver.url });
    // The resolve happens with a webhook set, so only it is sent; the open never is.
    await ch.heal();
    const resolved = await waitFor(() => receiver!.received.find((r) => r.body.target === "silent"));
    expect(resolved.body.status).toBe("resolved");
    await Bun.sleep(2500);
    expect(receiver.received.filter((r) => r.body.target === "silent").map((r) => r.body.status)).toEqual(["resolved"]);
  });

  test("an open still waiting when the alert resolves without a webhook is never sent: no receiver learns of an alert left open for good", async () => {
    const failing = startReceiver(Number.POSITIVE_INFINITY);
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: failing.url, health_check_seconds: 1 });
    const ch = await shakyChannel("stale");
    await ch.breakIt();
    // The open was tried (and failed), so it waits for the next round.
    await waitFor(() => failing.received.find((r) => r.body.target === "stale"));
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: "" });
    failing.stop();
    await ch.heal();
    receiver = startReceiver();
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: receiver.url });
    // Another alert's open shows the new webhook is being delivered to.
    const other = await shakyChannel("fresh");
    await other.breakIt();
    await waitFor(() => receiver!.received.find((r) => r.body.target === "fresh"));
    await Bun.sleep(1500);
    expect(receiver.received.filter((r) => r.body.target === "stale")).toEqual([]);
    await other.heal();
    await waitFor(() => receiver!.received.find((r) => r.body.target === "fresh" && r.body.status === "resolved"));
  });

  test("the receiver's answer is never read: an endless body costs nothing, and nothing asks for compression", async () => {
    // A receiver that answers 200 with a body that never ends (ops audit H1: Kura read it whole,
    // past 3 GiB RSS, and asked for gzip, which made a small answer a decompression bomb).
    const sent = { bytes: 0, acceptEncoding: [] as (string | null)[], statuses: [] as unknown[] };
    const chunk = new Uint8Array(1024 * 1024);
    const endless = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        sent.acceptEncoding.push(req.headers.get("accept-encoding"));
        sent.statuses.push(((await req.json()) as { status: string }).status);
        return new Response(
          new ReadableStream({
            pull(c) {
              sent.bytes += chunk.length;
              c.enqueue(chunk);
            },
          }),
        );
      },
    });
    try {
      await admin.json("PUT", "/api/admin/config", { alert_webhook_url: `http://127.0.0.1:${endless.port}/hook`, health_check_seconds: 1 });
      const ch = await shakyChannel("endless");
      await ch.breakIt();
      await server.waitForLog(/msg=告警通知已发送 kind=channel_unhealthy target=endless status=open/, 8000);
      await ch.heal();
      await server.waitForLog(/msg=告警通知已发送 kind=channel_unhealthy target=endless status=resolved/, 8000);
      // Each delivery counted on its status alone, once; its body was cancelled almost at once.
      expect(sent.statuses).toEqual(["open", "resolved"]);
      expect(sent.bytes).toBeLessThan(64 * 1024 * 1024);
      expect(sent.acceptEncoding.every((v) => v === "identity")).toBe(true);
    } finally {
      endless.stop(true);
    }
  });
});
