/**
 * Channel secrets beyond the declared options (channel audit M3, L1). An rclone option Kura's
 * driver does not use, such as an S3 SSE-C key (`sse_customer_key`), is kept for the rclone
 * export but handled as a secret: masked on read, sealed, only "set" in the audit log, kept by
 * the sentinel. Kura's own keys (`path`, `public_base_url`) stay readable. And a test that sends
 * a stored secret (the sentinel) to a configuration other than the stored one is recorded as a
 * `channel.export`: the secret went somewhere the admin chose, as with the rclone download.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { queryDb, SENTINEL } from "./channels.helpers";

const SSE_KEY = "SSECCANARY-0123456789abcdef0123456";

describe("options a driver does not declare are secrets", () => {
  let scratch: string;
  let id = 0;
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), "kura-channel-keys-"));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const { server, admin } = useAdmin();
  const config = () => ({ path: join(scratch, "disk"), public_base_url: "https://cdn.example.com/x", sse_customer_key: SSE_KEY });

  test("masked on read, only 'set' in the audit, kept by the sentinel, exported for rclone", async () => {
    id = (await admin.json("POST", "/api/admin/channels", { name: "disk", driver: "local", config: config() }, 201)).id;
    const view = await admin.json("GET", `/api/admin/channels/${id}/config`);
    expect(view.config).toEqual({ ...config(), sse_customer_key: SENTINEL });

    const audit = queryDb<{ detail: string }>(server, "SELECT detail FROM audit WHERE action = 'channel.create'");
    expect(JSON.parse(audit[0]!.detail).config).toMatchObject({ path: config().path, sse_customer_key: "set" });
    expect(JSON.stringify(audit)).not.toContain(SSE_KEY);

    await admin.json("PUT", `/api/admin/channels/${id}`, { name: "disk", priority: 0, allow_direct_link: false, driver: "local", config: view.config });
    const exported = await admin.request("GET", `/api/admin/channels/${id}/rclone-config`);
    expect(await exported.text()).toContain(`sse_customer_key = ${SSE_KEY}`);
    // Nothing of it in the database outside the sealed secrets.
    expect(JSON.stringify(queryDb(server, "SELECT * FROM audit"))).not.toContain(SSE_KEY);
  });

  test("a test that sends a stored secret to another configuration is audited as channel.export", async () => {
    const view = await admin.json("GET", `/api/admin/channels/${id}/config`);
    const exports = () => queryDb<{ target: string; detail: string }>(server, "SELECT target, detail FROM audit WHERE action = 'channel.export'");
    const before = exports().length;

    // The stored configuration itself: nothing leaves, nothing to record.
    expect(await admin.json("POST", "/api/admin/channels/test", { channel_id: id, driver: "local", config: view.config })).toEqual({ ok: true });
    expect(exports().length).toBe(before);
    // New secrets typed in: nothing stored is used.
    const typed = { ...view.config, path: join(scratch, "elsewhere"), sse_customer_key: "another-key" };
    expect(await admin.json("POST", "/api/admin/channels/test", { channel_id: id, driver: "local", config: typed })).toEqual({ ok: true });
    expect(exports().length).toBe(before);

    // The stored key, sent with another path: recorded, with where it went and never the key.
    const moved = { ...view.config, path: join(scratch, "elsewhere") };
    expect(await admin.json("POST", "/api/admin/channels/test", { channel_id: id, driver: "local", config: moved })).toEqual({ ok: true });
    const after = exports();
    expect(after.length).toBe(before + 1);
    expect(after.at(-1)!.target).toBe(String(id));
    expect(JSON.parse(after.at(-1)!.detail)).toMatchObject({
      name: "disk",
      via: "test",
      config: { path: join(scratch, "elsewhere"), sse_customer_key: "set" },
    });
    expect(after.at(-1)!.detail).not.toContain(SSE_KEY);
  });
});
