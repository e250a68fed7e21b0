import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createS3Driver } from "../../src/channels/drivers/s3";
import { startS3, TEST_CREDENTIALS, type RunningS3 } from "../channels/s3rver-harness";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { queryDb, replicaOn, SENTINEL, waitFor, waitReplicaState } from "./channels.helpers";

const BUCKET = "kura-channel";

describe("storage channel admin API against a real S3 server", () => {
  let scratch: string;
  let s3: RunningS3;
  let channelId = 0;
  const imageIds: string[] = [];

  const inputs = (overrides: Record<string, string> = {}) => ({
    endpoint: s3.endpoint,
    access_key_id: TEST_CREDENTIALS.accessKeyId,
    secret_access_key: TEST_CREDENTIALS.secretAccessKey,
    path: BUCKET,
    ...overrides,
  });
  /** Our own view of the bucket, straight through the S3 API. */
  const bucket = () =>
    createS3Driver({
      provider: "Minio",
      endpoint: s3.endpoint,
      access_key_id: TEST_CREDENTIALS.accessKeyId,
      secret_access_key: TEST_CREDENTIALS.secretAccessKey,
      path: BUCKET,
    });
  const keysInBucket = async () => {
    const keys: string[] = [];
    for await (const o of bucket().list("")) keys.push(o.key);
    return keys.sort();
  };
  const channel = async () => (await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === channelId);

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "kura-channels-s3-"));
    // No bucket yet: creation must make it (auto_create_bucket).
    s3 = await startS3({ directory: join(scratch, "s3") });
  });
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    imageIds.push((await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 41), "first.jpg"))).id);
  });
  afterAll(async () => {
    await s3.stop().catch(() => {});
    rmSync(scratch, { recursive: true, force: true });
  });

  test("a failing probe on create is a 400 without credentials, and nothing is saved", async () => {
    const wrong = "wrong-secret-value-XYZ123";
    const res = await admin.request("POST", "/api/admin/channels", {
      name: "s3",
      template: "minio",
      inputs: inputs({ secret_access_key: wrong }),
      auto_create_bucket: true,
    });
    const text = await res.clone().text();
    const reason = await expectError(res, 400);
    expect(reason).toMatch(/探测失败/);
    expect(text).not.toContain(wrong);
    expect(text).not.toContain(TEST_CREDENTIALS.accessKeyId);
    expect((await admin.json("GET", "/api/admin/channels")).items.map((c: { name: string }) => c.name)).toEqual(["local"]);
    expect(queryDb(server, "SELECT * FROM channels WHERE name = 's3'")).toEqual([]);
    // The test endpoint reports the same failure as data, also without the secret.
    const tested = await admin.json("POST", "/api/admin/channels/test", { template: "minio", inputs: inputs({ secret_access_key: wrong }) });
    expect(tested.ok).toBe(false);
    expect(tested.error).toMatch(/[\u4e00-\u9fff]/);
    expect(JSON.stringify(tested)).not.toContain(wrong);
  });

  test("create from a template with auto_create_bucket; existing images are replicated", async () => {
    const created = await admin.json(
      "POST",
      "/api/admin/channels",
      { name: "s3", template: "minio", inputs: inputs(), auto_create_bucket: true, priority: 10 },
      201,
    );
    channelId = created.id;
    expect(created).toMatchObject({ driver: "s3", healthy: true, priority: 10, encrypted: false });
    await waitReplicaState(admin, imageIds[0]!, channelId, "done");
    const keys = await keysInBucket();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^img\//);
    const [entry] = queryDb<{ detail: string }>(server, "SELECT detail FROM audit WHERE action = 'channel.create'");
    expect(entry!.detail).not.toContain(TEST_CREDENTIALS.secretAccessKey);
    expect(entry!.detail).not.toContain(TEST_CREDENTIALS.accessKeyId);
    expect(JSON.parse(entry!.detail).inputs).toMatchObject({ access_key_id: "set", secret_access_key: "set", endpoint: s3.endpoint });
  });

  test("secrets are masked on read and the sentinel keeps them on PUT", async () => {
    const view = await admin.json("GET", `/api/admin/channels/${channelId}/config`);
    expect(view.template).toBe("minio");
    expect(view.driver).toBe("s3");
    expect(view.inputs).toMatchObject({ access_key_id: SENTINEL, secret_access_key: SENTINEL, endpoint: s3.endpoint, path: BUCKET });
    expect(view.config).toMatchObject({ provider: "Minio", access_key_id: SENTINEL, secret_access_key: SENTINEL, endpoint: s3.endpoint });
    expect(JSON.stringify(view)).not.toContain(TEST_CREDENTIALS.secretAccessKey);
    expect(JSON.stringify(view)).not.toContain(TEST_CREDENTIALS.accessKeyId);

    // A changed endpoint (same server by another name) forces a deep probe, which only passes with the kept secrets.
    const endpoint = s3.endpoint.replace("127.0.0.1", "localhost");
    const put = await admin.json("PUT", `/api/admin/channels/${channelId}`, {
      name: "s3-main",
      priority: 10,
      allow_direct_link: false,
      template: "minio",
      inputs: { ...view.inputs, endpoint },
    });
    expect(put).toMatchObject({ name: "s3-main", healthy: true, last_error: "" });
    const after = await admin.json("GET", `/api/admin/channels/${channelId}/config`);
    expect(after.inputs.endpoint).toBe(endpoint);
    expect(after.inputs.secret_access_key).toBe(SENTINEL);
    const checked = await admin.json("POST", `/api/admin/channels/${channelId}/check`);
    expect(checked).toMatchObject({ healthy: true, last_error: "" });

    const base = { name: "s3-main", priority: 10, allow_direct_link: false, template: "minio" };
    // The sentinel is only valid where a read masked something.
    expect(
      await expectError(await admin.request("PUT", `/api/admin/channels/${channelId}`, { ...base, inputs: { ...after.inputs, endpoint: SENTINEL } }), 400),
    ).toContain("endpoint");
    await expectError(await admin.request("PUT", `/api/admin/channels/${channelId}`, { ...base, inputs: after.inputs, encrypted: true }), 409);
    // A wrong new secret is probed and refused; the stored one stays in force.
    await expectError(
      await admin.request("PUT", `/api/admin/channels/${channelId}`, { ...base, inputs: { ...after.inputs, secret_access_key: "nope-nope" } }),
      400,
    );
    expect((await admin.json("POST", `/api/admin/channels/${channelId}/check`)).healthy).toBe(true);
  });

  test("test with channel_id restores sentinels from the stored channel", async () => {
    const view = await admin.json("GET", `/api/admin/channels/${channelId}/config`);
    expect(await admin.json("POST", "/api/admin/channels/test", { channel_id: channelId, template: "minio", inputs: view.inputs })).toEqual({ ok: true });
    // Custom mode against the same stored channel: config keys were masked too.
    expect(await admin.json("POST", "/api/admin/channels/test", { channel_id: channelId, driver: "s3", config: view.config })).toEqual({ ok: true });
    // Without channel_id there is nothing to restore.
    await expectError(await admin.request("POST", "/api/admin/channels/test", { template: "minio", inputs: view.inputs }), 400);
    await expectError(await admin.request("POST", "/api/admin/channels/test", { channel_id: 999999, template: "minio", inputs: view.inputs }), 404);
  });

  test("server down: check marks unhealthy and alerts; back up: check heals and retries failed replicas", async () => {
    await s3.stop();
    const down = await admin.json("POST", `/api/admin/channels/${channelId}/check`);
    expect(down.healthy).toBe(false);
    expect(down.last_error).toMatch(/S3/);
    expect(down.last_checked_at).not.toBe("");
    const alerts = queryDb<{ message: string; resolved_at: string }>(
      server,
      "SELECT message, resolved_at FROM alerts WHERE kind = 'channel_unhealthy' AND target = 's3-main'",
    );
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.resolved_at).toBe("");
    await server.waitForLog(/msg=告警已触发 kind=channel_unhealthy target=s3-main/);

    // Uploaded while the channel is down: stored locally, its replica to S3 fails.
    const id = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 42), "second.jpg"))).id;
    imageIds.push(id);
    await waitReplicaState(admin, id, channelId, "failed");
    expect((await channel()).replicas.failed).toBe(1);

    s3 = await startS3({ directory: join(scratch, "s3"), port: s3.port });
    const up = await admin.json("POST", `/api/admin/channels/${channelId}/check`);
    expect(up).toMatchObject({ healthy: true, last_error: "" });
    await waitReplicaState(admin, id, channelId, "done", 20_000);
    expect((await channel()).replicas).toEqual({ done: 2, pending: 0, failed: 0 });
    expect(queryDb<{ resolved_at: string }>(server, "SELECT resolved_at FROM alerts WHERE kind = 'channel_unhealthy'")[0]!.resolved_at).not.toBe("");
  });

  test("purge delete: a failing drain raises drain_failed and retries; only our objects go, then the channel", async () => {
    const foreign = ["notes/readme.txt", `img/00/11/${"1".repeat(64)}-deadbeef.png`];
    for (const key of foreign) await bucket().put(key, new TextEncoder().encode("foreign"), 7);
    await bucket().put("_kura/backups/kura-20260101-000000.000.db", new TextEncoder().encode("snap"), 4);
    expect((await keysInBucket()).length).toBe(5);

    // The backend is unreachable when the drain starts: nothing can be deleted yet.
    await s3.stop();
    await admin.json("DELETE", `/api/admin/channels/${channelId}`, undefined, 202);
    expect((await channel()).deleting).toBe(true);
    await server.waitForLog(/msg=告警已触发 kind=drain_failed target=s3-main/);
    const open = queryDb<{ resolved_at: string }>(server, "SELECT resolved_at FROM alerts WHERE kind = 'drain_failed' AND target = 's3-main'");
    expect(open).toEqual([{ resolved_at: "" }]);
    // A draining channel takes no new writes: no replica of a new image is even planned there.
    const third = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 43), "third.jpg"))).id;
    expect(await replicaOn(admin, third, channelId)).toBeUndefined();
    expect((await replicaOn(admin, third, 1))?.state).toBe("done");

    s3 = await startS3({ directory: join(scratch, "s3"), port: s3.port });
    await waitFor(channel, (c) => c === undefined, 20_000, "drained S3 channel to disappear");
    expect(await keysInBucket()).toEqual([...foreign].sort());
    await server.waitForLog(/msg=存储渠道已清空并移除 channel=s3-main objects=2 system_objects=1/);
    const resolved = queryDb<{ resolved_at: string }>(server, "SELECT resolved_at FROM alerts WHERE kind = 'drain_failed' AND target = 's3-main'");
    expect(resolved).toHaveLength(1);
    expect(resolved[0]!.resolved_at).not.toBe("");
  });
});
