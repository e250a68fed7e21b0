/**
 * Above distance 6 the index cannot answer a new blob's neighbours: each round's new blobs are
 * compared in a worker. The pairs must equal a brute-force scan however the blobs arrive, and
 * the round must not stall the event loop over a large library.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMeta, writeMeta } from "../../src/db/meta";
import { scanRound, stopRescans } from "../../src/images/dedup";
import { phashChunks, phashToInt } from "../../src/images/phash-index";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";
import { blobInserter, bruteForce, cappedPairs, halves, hex64, liveBlobs, popcount32, population, rng, storedPairs } from "../helpers/phashes";

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

const INDEXED = 250_000;

test(`a round of 100 new blobs at distance 9 over ${INDEXED} indexed hashes keeps the event loop responsive`, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-pause-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const add = blobInserter(app.db);
    const random = rng(424242);
    // A library already scanned: blobs and their index rows written directly, the watermark past them.
    const indexRow = app.db.query("INSERT INTO phash_index (chunk, value, blob_id, hash) VALUES (?, ?, ?, ?)");
    const t0 = performance.now();
    let after = 0;
    app.db.transaction(() => {
      for (const h of population(INDEXED, random)) {
        const id = add(h);
        const hash = phashToInt(h);
        for (const [chunk, value] of phashChunks(hash).entries()) indexRow.run(chunk, value, id, hash);
        after = id;
      }
    })();
    writeMeta(app.db, "dedup_scan_watermark", JSON.stringify({ after, waiting: [], distance: 9 }));
    app.settings.update({ dedup_phash_max_distance: 9 });
    console.log(`seeded ${INDEXED} indexed hashes in ${(performance.now() - t0).toFixed(0)} ms`);
    // New blobs, half of them near an indexed one (a few bits flipped), half anywhere.
    const indexed = liveBlobs(app.db);
    const fresh: { id: number; phash: string }[] = [];
    for (let i = 0; i < 100; i++) {
      let h = i % 2 ? phashToInt(indexed[Math.floor(random() * indexed.length)]!.phash) : BigInt(Math.floor(random() * 2 ** 52)) * 4099n;
      for (let f = 0; f < 1 + Math.floor(random() * 9); f++) h ^= 1n << BigInt(Math.floor(random() * 64));
      const phash = hex64(h);
      fresh.push({ id: add(phash), phash });
    }

    // The loop's longest pause during the round, by a 5 ms probe that stays on 10 ms after it (the gap up to its end).
    const { value: round, totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => scanRound(app), { everyMs: 5, tailMs: 10 });
    console.log(`round of 100 new blobs over ${INDEXED} indexed: ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`);
    expect(round.compared).toBe(100);

    // Exactly the pairs that involve a new blob, by brute force over halves.
    const expected: string[] = [];
    const all = indexed.map(halves);
    const news = fresh.map(halves);
    for (const [k, a] of news.entries()) {
      for (const b of [...all, ...news.slice(k + 1)]) {
        const d = popcount32(a.hi ^ b.hi) + popcount32(a.lo ^ b.lo);
        if (d <= 9) expected.push(`${Math.min(a.id, b.id)}-${Math.max(a.id, b.id)}-${d}`);
      }
    }
    expect(expected.length).toBeGreaterThan(40);
    expect(storedPairs(app.db)).toEqual(expected.sort());
    expect(JSON.parse(readMeta(app.db, "dedup_scan_watermark")!).after).toBe(fresh.at(-1)!.id);
    // Comparing on the loop is one pause as long as the round; in the worker the loop only stores pairs and
    // indexes slices (a loaded machine adds pauses of its own, so the bound is relative).
    expect(longest).toBeLessThan(total / 2);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

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
