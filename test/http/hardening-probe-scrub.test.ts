import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startApacheDav, type ApacheDav } from "../channels/servers/apache";
import { waitFor } from "./channels.helpers";
import { useAdmin } from "../helpers/fixture";

/** The WebDAV password; the collection is named after it too, so every error naming the URL carries it. */
const SECRET = "dav-secret-7f3a9c";

describe("row 11: channel errors are scrubbed on every probe path", () => {
  let scratch: string;
  let dav: ApacheDav;
  let channelId: number;
  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "kura-scrub-"));
    dav = await startApacheDav(join(scratch, "apache"), { kura: SECRET });
    await dav.start();
    mkdirSync(join(dav.davDir, SECRET));
  });
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    const ch = await admin.json(
      "POST",
      "/api/admin/channels",
      { template: "webdav", inputs: { url: `${dav.url}${SECRET}/`, user: "kura", pass: SECRET }, name: "dav" },
      201,
    );
    channelId = ch.id;
  });
  afterAll(async () => {
    await dav.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("periodic probes, manual checks, alerts and logs never repeat a credential", async () => {
    await dav.stop();
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
    const channel = await waitFor(
      async () => (await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === channelId),
      (c) => c.healthy === false && c.last_error !== "",
      15_000,
      "the periodic probe to fail",
    );
    expect(channel.last_error).toMatch(/WebDAV/);
    // The url (which carries the secret as its collection) is configuration and is not named at all (spec 6.3).
    expect(channel.last_error).not.toContain(dav.url);
    expect(channel.last_error).not.toContain(SECRET);

    const checked = await admin.json("POST", `/api/admin/channels/${channelId}/check`);
    expect(checked.healthy).toBe(false);
    expect(checked.last_error).not.toContain(SECRET);

    const alerts = await waitFor(
      async () => (await admin.json("GET", "/api/admin/alerts")).items as { target: string; message: string }[],
      (items) => items.some((a) => a.target === "dav"),
      15_000,
      "the channel_unhealthy alert",
    );
    expect(JSON.stringify(alerts)).not.toContain(SECRET);
    await server.waitForLog(/存储渠道不健康.*channel=dav/);
    expect(server.logs).not.toContain(SECRET);
  });
});
