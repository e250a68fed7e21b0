import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { judgeCold } from "../../src/images/sweep";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";

const IMAGES = 10_000;

/**
 * Re-judging the cleanup list after a change of cold_cleanup_days (a settings save) flags or
 * unflags up to every image. At a million images each changed row costs ~0.1 ms (random pages of
 * two partial indexes); a few thousand rows here cost that too through a temporary trigger that
 * burns ~0.1 ms per changed row, so a 2,000-row statement stalls the loop ~200 ms as it did there.
 */
test("a cold_cleanup_days change re-judges in ~10 ms slices, the caller's turn included", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-cold-rejudge-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const blob = Number(
      app.db
        .query(
          "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES ('s', 'k', 'image/jpeg', 1, 1, 1, ?, '2025-01-01 00:00:00')",
        )
        .run(IMAGES).lastInsertRowid,
    );
    const insert = app.db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, 'default', ?, '2025-01-01 00:00:00')");
    app.db.transaction(() => {
      for (let i = 0; i < IMAGES; i++) insert.run(`c${String(i).padStart(9, "0")}`, blob, `IMG_${i}.jpg`);
    })();
    app.db.exec(`CREATE TEMP TRIGGER slow_rejudge AFTER UPDATE OF pending_cleanup ON images BEGIN
      SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 700) SELECT x FROM c);
    END`);
    const listed = () => app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM images WHERE pending_cleanup = 1").get()!.n;

    for (const [days, expected] of [
      [1, IMAGES],
      [0, 0],
    ] as const) {
      app.settings.update({ cold_cleanup_days: days });
      // The caller's turn (a settings save) holds one slice at most, microtasks included: the probe sees it.
      const { totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => judgeCold(app));
      console.log(`cold_cleanup_days=${days}: ${IMAGES} rows re-judged in ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`);
      expect(listed()).toBe(expected);
      // Slices of ~10 ms: far below a 2,000-row statement (a fifth of the run here); relative, since a
      // loaded machine adds pauses of its own.
      expect(longest).toBeLessThan(total / 15);
    }

    // A save of 1 and then 0 while the first re-judge still runs: only the newest goes on, so the
    // list ends empty (the first run, left going, flagged with its old cutoff what the second unflagged).
    app.settings.update({ cold_cleanup_days: 1 });
    const first = judgeCold(app);
    await Bun.sleep(100);
    app.settings.update({ cold_cleanup_days: 0 });
    const second = await judgeCold(app);
    const cut = await first;
    expect(cut.flagged).toBeGreaterThan(0);
    expect(cut.flagged).toBeLessThan(IMAGES);
    expect(second.unflagged).toBe(cut.flagged);
    expect(listed()).toBe(0);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
