import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { PHASH_DELAY_MS, PhashSweep } from "../../src/images/phash-sweep";
import type { UserRow } from "../../src/users/repo";
import { makeJpeg } from "../helpers/images";
import { serviceContext, uploadBytes } from "./harness";

describe("perceptual-hash sweep", () => {
  let app: AppContext;
  let admin: UserRow;
  let dispose: () => void;
  beforeAll(async () => ({ app, admin, dispose } = await serviceContext()));
  afterAll(() => dispose());

  async function upload(seed: number): Promise<number> {
    const { id } = await uploadBytes(app, admin.id, await makeJpeg(48, 40, seed), { exifPolicy: "passthrough" });
    return app.images.view(id)!.blob_id;
  }
  const phash = (blobId: number) => app.images.blob(blobId)!.phash;
  const later = (ms = 0) => Date.now() + PHASH_DELAY_MS + 1000 + ms;

  test("new blobs are hashed once the delay has passed, at most 16 per round, oldest first", async () => {
    const blobs: number[] = [];
    for (let i = 0; i < 20; i++) blobs.push(await upload(500 + i));
    const sweep = new PhashSweep();
    expect(await sweep.round(app)).toEqual({ hashed: 0, failed: 0 });
    expect(await sweep.round(app, later())).toEqual({ hashed: 16, failed: 0 });
    expect(blobs.filter((b) => phash(b) === "")).toEqual(blobs.slice(16));
    expect(await sweep.round(app, later())).toEqual({ hashed: 4, failed: 0 });
    for (const b of blobs) expect(phash(b)).toMatch(/^[0-9a-f]{16}$/);
    expect(await sweep.round(app, later())).toEqual({ hashed: 0, failed: 0 });
  });

  test("a blob that cannot be hashed waits 1 min, then 2 min, …, without holding up the others", async () => {
    const broken = await upload(600);
    const file = join(app.paths.storage, app.images.blob(broken)!.storage_key);
    expect(existsSync(file)).toBe(true);
    renameSync(file, `${file}.away`);
    const sweep = new PhashSweep();
    const t0 = later();
    expect(await sweep.round(app, t0)).toEqual({ hashed: 0, failed: 1 });
    expect(sweep.waitingRetry).toBe(1);
    // A newer blob is hashed while the broken one waits out its delay.
    const fine = await upload(601);
    expect(await sweep.round(app, t0 + 59_000)).toEqual({ hashed: 1, failed: 0 });
    expect(phash(fine)).toMatch(/^[0-9a-f]{16}$/);
    // Retried after 1 min, then not before 2 more.
    expect(await sweep.round(app, t0 + 61_000)).toEqual({ hashed: 0, failed: 1 });
    expect(await sweep.round(app, t0 + 61_000 + 119_000)).toEqual({ hashed: 0, failed: 0 });
    expect(await sweep.round(app, t0 + 61_000 + 121_000)).toEqual({ hashed: 0, failed: 1 });
    expect(phash(broken)).toBe("");
    renameSync(`${file}.away`, file);
    // Given up here (pending delete) so that the next test starts with nothing due; its backoff goes with it.
    app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(broken);
    expect(sweep.waitingRetry).toBe(1);
    await sweep.round(app, t0 + 61_000 + 121_000);
    expect(sweep.waitingRetry).toBe(0);
  });

  test("a blob waiting for its physical delete is not hashed", async () => {
    const blob = await upload(700);
    app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(blob);
    const sweep = new PhashSweep();
    expect(await sweep.round(app, later())).toEqual({ hashed: 0, failed: 0 });
    expect(phash(blob)).toBe("");
    app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(blob);
    expect(await sweep.round(app, later())).toEqual({ hashed: 1, failed: 0 });
  });
});
