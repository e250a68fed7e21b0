/**
 * The incremental index finds exactly the pairs a brute-force scan finds, and a round with nothing
 * new costs nothing. Alone in the suite's serial group: the idle round is timed.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scanRound } from "../../src/images/dedup";
import { openContext } from "../helpers/context";
import { bruteForce, liveBlobs, population, rng, storedPairs } from "../helpers/phashes";

test("the incremental index finds exactly the pairs a brute-force scan finds; an idle round costs nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const random = rng(20261124);
    const insert = app.db.query(
      `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
       VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
    );
    let n = 0;
    const add = (phash: string, pendingDelete = 0) => Number(insert.run(`sha-${n++}`, phash, pendingDelete).lastInsertRowid);
    const hashes = population(3000, random);
    const unhashed: { id: number; phash: string }[] = [];
    app.db.transaction(() => {
      hashes.forEach((h, i) => {
        // Some blobs are not hashed yet at the first round; one waits for its physical delete.
        if (i % 97 === 5) unhashed.push({ id: add(""), phash: h });
        else add(h, i === 1234 ? 1 : 0);
      });
    })();
    const maxDistance = app.settings.get().dedup_phash_max_distance;
    expect(maxDistance).toBe(6);
    const live = () => liveBlobs(app.db);
    const stored = () => storedPairs(app.db);

    const t1 = performance.now();
    const first = await scanRound(app);
    console.log(`first round over ${n} blobs: ${(performance.now() - t1).toFixed(0)} ms`);
    const expected = bruteForce(live(), maxDistance);
    expect(expected.length).toBeGreaterThan(1000);
    expect(stored()).toEqual(expected);
    expect(first.found).toBe(expected.length);

    // Late hashes, a revived blob and new uploads: the next round adds exactly the new pairs.
    const setHash = app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
    for (const u of unhashed) setHash.run(u.phash, u.id);
    app.db.query("UPDATE blobs SET pending_delete = 0 WHERE pending_delete = 1").run();
    for (const h of population(200, random)) add(h);
    const second = await scanRound(app);
    expect(second.compared).toBe(unhashed.length + 1 + 200);
    expect(stored()).toEqual(bruteForce(live(), maxDistance));

    // Nothing new: no comparison, no write, and (on a quiet machine, well under 10 ms) no time.
    const t0 = performance.now();
    const idle = await scanRound(app);
    const idleMs = performance.now() - t0;
    expect(idle).toEqual({ compared: 0, found: 0 });
    console.log(`idle dedup round over ${n} blobs: ${idleMs.toFixed(2)} ms`);
    expect(idleMs).toBeLessThan(100);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
