/**
 * Above distance 6 the index cannot answer a new blob's neighbours: each round's new blobs are
 * compared in a worker. The pairs must equal a brute-force scan however the blobs arrive; a stop
 * ends the round at once. (That the round keeps the event loop free: dedup-worker-pause.test.ts.)
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMeta } from "../../src/db/meta";
import { scanRound, stopRescans } from "../../src/images/dedup";
import { openContext } from "../helpers/context";
import { blobInserter, bruteForce, cappedPairs, liveBlobs, population, rng, storedPairs } from "../helpers/phashes";

for (const [distance, size] of [
  [9, 3000],
  [13, 3000],
  [25, 1500],
] as const) {
  test(`at distance ${distance} new blobs are paired in a worker: over several rounds the pairs equal brute force (with the per-blob cap)`, async () => {
    const dir = mkdtempSync(join(tmpdir(), `kura-dedup-fresh-${distance}-`));
    const ctx = await openContext(dir);
    try {
      const { app } = ctx;
      app.settings.update({ dedup_phash_max_distance: distance });
      const add = blobInserter(app.db);
      const random = rng(distance * 1000 + size);
      const unhashed: { id: number; phash: string }[] = [];
      let pending = 0;
      const ready: { id: number; phash: string }[] = [];
      app.db.transaction(() => {
        population(size, random).forEach((h, i) => {
          // Some blobs are not hashed yet at the first round; one waits for its physical delete.
          if (i % 97 === 5) unhashed.push({ id: add(""), phash: h });
          else if (i === 1234 % size) pending = add(h, 1);
          else ready.push({ id: add(h), phash: h });
        });
      })();
      const pendingBlob = { id: pending, phash: app.db.query<{ phash: string }, [number]>("SELECT phash FROM blobs WHERE id = ?").get(pending)!.phash };
      // The order the scans compare blobs in, round after round (cappedPairs replays it).
      const rounds: { id: number; phash: string }[][] = [ready];

      const first = await scanRound(app);
      expect(first.compared).toBe(size - unhashed.length - 1);
      expect(storedPairs(app.db)).toEqual(cappedPairs(rounds, distance));
      expect(first.found).toBe(storedPairs(app.db).length);

      // New uploads, then, while the worker runs: late hashes, a revived blob, and uploads that wait for the next round.
      const second: { id: number; phash: string }[] = [];
      for (const phash of population(200, random)) second.push({ id: add(phash), phash });
      const round = scanRound(app);
      const setHash = app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
      for (const u of unhashed) setHash.run(u.phash, u.id);
      app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(pending);
      const late: { id: number; phash: string }[] = [];
      for (const phash of population(150, random)) late.push({ id: add(phash), phash });
      await round;
      const lateSet = new Set(late.map((b) => b.id));
      expect(storedPairs(app.db).filter((p) => p.split("-").some((id) => lateSet.has(Number(id))))).toEqual([]);
      // Waiting blobs the worker read as ready went first in that round; the others still wait (the watermark says which).
      const stillWaiting = new Set<number>(JSON.parse(readMeta(app.db, "dedup_scan_watermark")!).waiting);
      const waited = [...unhashed, pendingBlob].sort((a, b) => a.id - b.id);
      rounds.push([...waited.filter((b) => !stillWaiting.has(b.id)), ...second]);
      expect(storedPairs(app.db)).toEqual(cappedPairs(rounds, distance));

      // The next round compares everything that waited; then a round with nothing new compares nothing.
      await scanRound(app);
      rounds.push([...waited.filter((b) => stillWaiting.has(b.id)), ...late]);
      expect(storedPairs(app.db)).toEqual(cappedPairs(rounds, distance));
      const fourth: { id: number; phash: string }[] = [];
      for (const phash of population(100, random)) fourth.push({ id: add(phash), phash });
      expect((await scanRound(app)).compared).toBe(100);
      rounds.push(fourth);
      expect(storedPairs(app.db)).toEqual(cappedPairs(rounds, distance));
      expect(await scanRound(app)).toEqual({ compared: 0, found: 0 });
      // Every pair within reach is stored at 9 and 13 (clusters of ≤8); at 25 the cap keeps fewer.
      const all = bruteForce(liveBlobs(app.db), distance);
      if (distance < 20) expect(storedPairs(app.db)).toEqual(all);
      else expect(storedPairs(app.db).length).toBeLessThan(all.length / 2);
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
}

test("a blob hashed after the worker read it as unhashed is compared in the next round", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-fresh-race-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    app.settings.update({ dedup_phash_max_distance: 25 });
    const add = blobInserter(app.db);
    const random = rng(2525);
    const hashes = population(1500, random);
    const unhashed = hashes.slice(0, 5).map((phash) => ({ id: add(""), phash }));
    const ready: { id: number; phash: string }[] = [];
    app.db.transaction(() => {
      for (const phash of hashes.slice(5)) ready.push({ id: add(phash), phash });
    })();
    const count = () => app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM dedup_candidates").get()!.n;
    // ~30k pairs (20 a blob): the worker read the blobs once the first batch is stored, and still has many to go.
    const round = scanRound(app);
    while (count() === 0) await Bun.sleep(1);
    const setHash = app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
    for (const u of unhashed) setHash.run(u.phash, u.id);
    expect((await round).compared).toBe(1495);
    expect((await scanRound(app)).compared).toBe(5);
    expect(storedPairs(app.db)).toEqual(cappedPairs([ready, unhashed], 25));
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test("a stop while the worker compares new blobs ends the round at once; nothing is lost, the next start redoes it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-fresh-stop-"));
  let ctx = await openContext(dir);
  try {
    const add = blobInserter(ctx.app.db);
    ctx.app.db.transaction(() => {
      for (const h of population(10_000, rng(55))) add(h);
    })();
    // Distance 40 is within reach of nearly all of the 50 million pairs: 200k pairs kept (20 a blob), far more batches than this test waits for.
    ctx.app.settings.update({ dedup_phash_max_distance: 40 });
    const round = scanRound(ctx.app);
    await Bun.sleep(500);
    const t0 = performance.now();
    stopRescans(ctx.app);
    expect(await round).toMatchObject({ compared: 0 });
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(ctx.logs.some((l) => l.msg.includes("相似图片重新扫描将在下次启动后重做"))).toBe(true);
    // Stopped before the pairs were all stored: nothing joined the index and the watermark did not move.
    expect(readMeta(ctx.app.db, "dedup_scan_watermark")).toBeUndefined();
    expect(ctx.app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM phash_index").get()!.n).toBe(0);
    ctx.close();
    ctx = await openContext(dir);
    ctx.app.settings.update({ dedup_phash_max_distance: 9 });
    expect((await scanRound(ctx.app)).compared).toBe(10_000);
    const stored = storedPairs(ctx.app.db);
    const distanceOf = (p: string) => Number(p.split("-")[2]);
    expect(stored.filter((p) => distanceOf(p) <= 9)).toEqual(bruteForce(liveBlobs(ctx.app.db), 9));
    expect(stored.every((p) => distanceOf(p) <= 40)).toBe(true);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
