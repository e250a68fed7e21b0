/**
 * Two uploads of the same bytes at once: both find no blob when they start, so each writes its
 * own object, and the one that commits second becomes a reference to the first one's blob. Its
 * own object is then nobody's: it must be deleted at once (not left to the daily reconciliation),
 * and it must not be recorded as a replica of a blob whose key it does not hold.
 *
 * Deterministic: the first upload is paused after its write, before its commit (test-only pause
 * point `upload.commit`), while the second one runs through.
 */
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";

const pauseDir = mkdtempSync(join(tmpdir(), "kura-pause-"));
const ARMED = join(pauseDir, "upload.commit");
const { server, admin } = useAdmin({ env: { KURA_TEST_HOOKS: "upload.commit", KURA_TEST_PAUSE_DIR: pauseDir } });
afterAll(() => rmSync(pauseDir, { recursive: true, force: true }));

function readDb<T>(sql: string): T[] {
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query(sql).all() as T[];
  } finally {
    db.close();
  }
}

test("the upload that commits second keeps no object of its own: one file, one blob, one replica, both links serve the bytes", async () => {
  const bytes = await makeJpeg(160, 120, 4242);
  const upload = (name: string) => admin.json<{ id: string }>("POST", "/api/admin/upload", form(bytes, name, { exif_policy: "passthrough" }));

  writeFileSync(ARMED, "");
  let first: Promise<{ id: string }> | undefined;
  let secondId = "";
  try {
    first = upload("first.jpg");
    await server.waitForLog(/kura-test-hook paused point=upload\.commit key=\S+/, 20_000);
    // The paused upload's object is written; the second finds no blob either and writes its own.
    secondId = (await upload("second.jpg")).id;
  } finally {
    rmSync(ARMED, { force: true });
    rmSync(`${ARMED}.held`, { force: true });
  }
  const firstId = (await first).id;

  const blobs = readDb<{ id: number; storage_key: string; ref_count: number }>("SELECT id, storage_key, ref_count FROM blobs");
  expect(blobs.length).toBe(1);
  expect(blobs[0]!.ref_count).toBe(2);
  const objects = listFiles(join(server.dataDir, "storage")).filter((f) => f.includes(sha256(bytes)));
  expect(objects).toEqual([blobs[0]!.storage_key]);
  expect(readDb("SELECT channel_id, state FROM blob_channels")).toEqual([{ channel_id: 1, state: "done" }]);
  expect(readDb("SELECT id FROM upload_intents")).toEqual([]);

  for (const id of [firstId, secondId]) {
    const res = await fetch(server.url(`/i/${id}`));
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  }
});
