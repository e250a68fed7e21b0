import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMeta } from "../../src/db/meta";
import { retimePendingDeletes, scheduleBlobDelete, watchDeleteGrace } from "../../src/images/delete";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";

const PENDING = 40_000;

test("re-timing 40k pending deletes after a grace change is exact and runs in small steps (no long stall)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-retime-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const insert = app.db.query(
      `INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at)
       VALUES (?, 'k', 'image/jpeg', 1, 1, 1, ?, '2026-01-01 00:00:00')`,
    );
    app.db.transaction(() => {
      for (let i = 0; i < PENDING * 1.25; i++) {
        const id = Number(insert.run(`sha-${i}`, i % 5 === 0 ? 1 : 0).lastInsertRowid);
        if (i % 5 !== 0) scheduleBlobDelete(app, id);
      }
    })();
    app.settings.update({ delete_grace_minutes: 5 });

    // The loop's longest pause while the re-timing runs (a 1 ms probe, on 5 ms past the run's end).
    const { value: result, totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => retimePendingDeletes(app));
    console.log(`re-timed ${result.retimed} pending deletes in ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`);
    expect(result).toEqual({ retimed: PENDING, due: 0 });

    const wrong = app.db
      .query<{ n: number }, []>(
        `SELECT count(*) AS n FROM blobs b JOIN jobs j ON j.kind = 'blob.delete' AND json_extract(j.payload, '$.blob_id') = b.id
         WHERE b.pending_delete = 1 AND (j.run_at != j.created_at + 300000 OR b.delete_after != strftime('%Y-%m-%d %H:%M:%S', (j.created_at + 300000) / 1000, 'unixepoch'))`,
      )
      .get()!.n;
    expect(wrong).toBe(0);
    // Live blobs are untouched.
    expect(app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM blobs WHERE pending_delete = 0 AND delete_after IS NOT NULL").get()!.n).toBe(0);
    // Each step is one batch of indexed statements: far shorter than the whole run (a single batch stalls the
    // loop for all of it; a loaded machine adds pauses of its own, so the bound is relative).
    expect(longest).toBeLessThan(total / 2);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("a re-timing cut short by a stop runs at the next start; the first start of this version re-times nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-retime-start-"));
  let ctx = await openContext(dir);
  try {
    const blob = Number(
      ctx.app.db
        .query(
          "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES ('s', 'k', 'image/jpeg', 1, 1, 1, 0, '2026-01-01 00:00:00')",
        )
        .run().lastInsertRowid,
    );
    ctx.app.db.transaction(() => scheduleBlobDelete(ctx.app, blob))();
    const deleteAfter = () => ctx.app.db.query<{ d: string }, [number]>("SELECT delete_after AS d FROM blobs WHERE id = ?").get(blob)!.d;
    const scheduled = deleteAfter();
    // First start with this version: whatever the grace, pending deletes keep their times.
    ctx.app.settings.update({ delete_grace_minutes: 30 });
    watchDeleteGrace(ctx.app);
    expect(readMeta(ctx.app.db, "delete_grace_applied_minutes")).toBe("30");
    await Bun.sleep(50);
    expect(deleteAfter()).toBe(scheduled);
    ctx.close();
    // The grace is saved as 5, and the server stops before re-timing (no watcher in this context).
    ctx = await openContext(dir);
    ctx.app.settings.update({ delete_grace_minutes: 5 });
    expect(deleteAfter()).toBe(scheduled);
    ctx.close();
    // The next start catches up.
    ctx = await openContext(dir);
    const created = ctx.app.db.query<{ c: number }, []>("SELECT created_at AS c FROM jobs WHERE kind = 'blob.delete'").get()!.c;
    watchDeleteGrace(ctx.app);
    const deadline = Date.now() + 5000;
    while (readMeta(ctx.app.db, "delete_grace_applied_minutes") !== "5" && Date.now() < deadline) await Bun.sleep(10);
    expect(readMeta(ctx.app.db, "delete_grace_applied_minutes")).toBe("5");
    expect(deleteAfter()).toBe(new Date(created + 5 * 60_000).toISOString().slice(0, 19).replace("T", " "));
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
