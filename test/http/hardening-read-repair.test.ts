import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { waitFor, waitReplicaState } from "./channels.helpers";

describe("row 12: read repair", () => {
  let primaryDir: string;
  let primaryId: number;
  let localId: number;
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    primaryDir = mkdtempSync(join(tmpdir(), "kura-ch-repair-"));
    primaryId = (await admin.json("POST", "/api/admin/channels", { name: "primary", driver: "local", config: { path: primaryDir }, priority: 10 }, 201)).id;
    localId = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id;
  });
  afterAll(async () => {
    rmSync(primaryDir, { recursive: true, force: true });
  });

  test("a read that finds a done replica missing marks it failed and re-replicates it at once", async () => {
    const bytes = await makeJpeg(50, 50, 31);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "r.jpg", { exif_policy: "passthrough" }));
    await waitReplicaState(admin, id, primaryId, "done");
    await waitReplicaState(admin, id, localId, "done");
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    const attempts = async () => {
      const detail = await admin.json("GET", `/api/admin/images/${id}`);
      return detail.replicas.find((r: { channel_id: number }) => r.channel_id === primaryId) as { state: string; attempts: number };
    };
    const before = await attempts();
    const objectOnPrimary = () => listFiles(primaryDir).find((f) => f.includes(sha));
    const file = objectOnPrimary()!;
    rmSync(join(primaryDir, file));

    // Nothing has read it yet, so the read goes to storage: primary misses, local serves.
    const res = await fetch(server.url(`/i/${id}`));
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);

    // Right after the read the replica is no longer a silent ✓: either still marked failed,
    // or already copied again (one more attempt recorded).
    const after = await attempts();
    expect(after.state !== "done" || after.attempts > before.attempts).toBe(true);

    // Re-replicated without waiting for the daily reconciliation.
    await waitFor(
      async () => objectOnPrimary(),
      (f) => f !== undefined,
      10_000,
      "the object back on primary",
    );
    const repaired = await waitReplicaState(admin, id, primaryId, "done", 10_000);
    expect(repaired!.last_error).toBe("");
    const channel = (await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === primaryId);
    expect(channel.replicas).toMatchObject({ done: 1, failed: 0 });
    await server.waitForLog(/副本对象缺失/);
  });
});
