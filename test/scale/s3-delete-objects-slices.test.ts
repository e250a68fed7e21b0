/**
 * S3 DeleteObjects of 1,000 keys (what rclone delete/purge and the SDK send per request): at a million
 * images each delete costs ~0.3-0.8 ms, and the whole batch in one turn of the loop held it 336-786 ms
 * (audit 10 MED-2). A temporary trigger burns ~1 ms per deleted image here, so an unsliced batch would
 * hold the loop ~1 s. The answer must stay what it was: every key in the order sent, unknown keys
 * Deleted too, Quiet leaving them out.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deleteKeys } from "../../src/s3/ops/objects";
import { el } from "../../src/s3/xml";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";

const KEYS = 1000;

let dir: string;
let ctx: Awaited<ReturnType<typeof openContext>>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-s3-delete-objects-"));
  ctx = await openContext(dir);
  const { db } = ctx.app;
  const blob = db.query(
    "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, ?, 'image/jpeg', 1, 1, 1, 1, '2025-01-01 00:00:00')",
  );
  const image = db.query(
    "INSERT INTO images (id, blob_id, user_id, file_name, object_key, created_at) VALUES (?, ?, 'default', 'x.jpg', ?, '2025-01-01 00:00:00')",
  );
  db.transaction(() => {
    for (let i = 0; i < KEYS + 10; i++) image.run(`s${String(i).padStart(9, "0")}`, Number(blob.run(`sha-${i}`, `k-${i}`).lastInsertRowid), `del/${i}.jpg`);
  })();
  db.exec(`CREATE TEMP TRIGGER slow_delete AFTER DELETE ON images BEGIN
    SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT x FROM c);
  END`);
});
afterAll(() => {
  ctx.close();
  rmSync(dir, { recursive: true, force: true });
});

const live = () => ctx.app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM images WHERE object_key LIKE 'del/%'").get()!.n;

test("1,000 keys are deleted in ~10 ms slices, and each is reported in the order sent", async () => {
  const { app } = ctx;
  const req = { user: app.users.byId("default")!, token: { id: null } } as never;
  // Two keys that do not exist and a folder key among them: S3 reports every one as Deleted.
  const keys = [...Array.from({ length: KEYS - 3 }, (_, i) => `del/${i}.jpg`), "del/missing.jpg", "del/none/", `del/${KEYS - 3}.jpg`];

  const { value: results, totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => deleteKeys(app, req, keys, false));
  console.log(`DeleteObjects of ${keys.length} keys in ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`);

  expect(results.map((r) => r?.xml)).toEqual(keys.map((key) => el("Deleted", el("Key", key)).xml));
  expect(live()).toBe(KEYS + 10 - (KEYS - 2));
  const audited = app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM audit WHERE action = 'image.delete'").get()!.n;
  expect(audited).toBe(KEYS - 2);
  // ~10 ms slices: well under the whole batch (relative, since a loaded machine adds pauses of its own).
  expect(longest).toBeLessThan(total / 3);
}, 60_000);

test("Quiet reports nothing for the deleted keys, and deletes them", async () => {
  const { app } = ctx;
  const req = { user: app.users.byId("default")!, token: { id: null } } as never;
  const results = await deleteKeys(app, req, [`del/${KEYS - 2}.jpg`, `del/${KEYS - 1}.jpg`], true, 0);
  expect(results).toEqual([undefined, undefined]);
  expect(live()).toBe(10);
});
