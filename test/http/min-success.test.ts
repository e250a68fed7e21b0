/**
 * min_success = 2 with two healthy channels: the upload answers only after both synchronous writes,
 * so both replicas are done (and both channels hold the bytes) the moment the 200 arrives.
 * Background replication is parked by the test-only hold point (KURA_TEST_HOOKS), so a copy made by
 * the replication job cannot stand in for a missing synchronous write.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { queryDb } from "./channels.helpers";

describe("min_success = 2", () => {
  let second: string;
  let secondId: number;

  beforeAll(async () => {
    second = mkdtempSync(join(tmpdir(), "kura-min2-"));
  });
  const { server, admin } = useAdmin({ env: { KURA_TEST_HOOKS: "replicate.before-put" } });
  beforeAll(async () => {
    secondId = (await admin.json("POST", "/api/admin/channels", { name: "second", driver: "local", config: { path: second }, priority: 1 }, 201)).id;
    await admin.json("PUT", "/api/admin/config", { min_success: 2 });
  });
  afterAll(async () => {
    rmSync(second, { recursive: true, force: true });
  });

  test("both replicas are done and both channels hold the bytes when the upload answers", async () => {
    for (const seed of [1, 2, 3]) {
      const bytes = await makeJpeg(50, 40, 300 + seed);
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, `m${seed}.jpg`, { exif_policy: "passthrough" }));
      const [blob] = queryDb<{ id: number; storage_key: string }>(
        server,
        "SELECT b.id, b.storage_key FROM images i JOIN blobs b ON b.id = i.blob_id WHERE i.id = ?",
        id,
      );
      const replicas = queryDb<{ channel_id: number; state: string }>(
        server,
        "SELECT channel_id, state FROM blob_channels WHERE blob_id = ? ORDER BY channel_id",
        blob!.id,
      );
      expect(replicas.map((r) => r.state)).toEqual(["done", "done"]);
      expect(replicas.map((r) => r.channel_id)).toContain(secondId);
      for (const dir of [join(server.dataDir, "storage"), second]) expect(readFileSync(join(dir, blob!.storage_key)).equals(bytes)).toBe(true);
    }
    // No replication job ran: every copy above was written before the answer.
    expect(server.logs).not.toContain("held point=replicate.before-put");
    expect(listFiles(second).filter((f) => f.startsWith("img/")).length).toBe(3);
  });
});
