import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMeta } from "../../src/db/meta";
import { scanRound, stopRescans } from "../../src/images/dedup";
import { hamming, phashChunks, phashToInt } from "../../src/images/phash-index";
import { openContext } from "../helpers/context";
import { blobInserter, bruteForce, cappedPairs, liveBlobs, liveById, population, rng, storedPairs } from "../helpers/phashes";

test("chunks cover all 64 bits: any two hashes within distance 6 share a chunk", () => {
  const random = rng(7);
  for (let n = 0; n < 2000; n++) {
    const a = phashToInt(population(1, random)[0]!);
    let b = a;
    const bits = new Set<number>();
    while (bits.size < 1 + Math.floor(random() * 6)) bits.add(Math.floor(random() * 64));
    for (const bit of bits) b ^= 1n << BigInt(bit);
    expect(hamming(a, b)).toBe(bits.size);
    const [ca, cb] = [phashChunks(a), phashChunks(b)];
    expect(ca.some((v, i) => v === cb[i])).toBe(true);
  }
});

test("a raised distance rescans the indexed blobs in a worker: pairs equal brute force (with the per-blob cap) at every distance, a lowered one keeps pairs", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-raise-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const insert = app.db.query(
      `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
       VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
    );
    let n = 0;
    const add = (phash: string, pendingDelete = 0) => Number(insert.run(`sha-${n++}`, phash, pendingDelete).lastInsertRowid);
    const random = rng(20261128);
    app.db.transaction(() => {
      for (const [i, h] of population(2500, random).entries()) add(h, i === 77 ? 1 : 0);
    })();
    const live = () => liveBlobs(app.db);
    const stored = () => storedPairs(app.db);
    const setDistance = (d: number) => app.settings.update({ dedup_phash_max_distance: d });

    await scanRound(app);
    expect(stored()).toEqual(bruteForce(live(), 6));
    // 7–20: the worker probes chunk neighbourhoods (radius 1–2); 21 and up: every pair. Each rescan adds, per blob,
    // its 20 nearest among the lower ids (at 20 and 21 some blobs have more than 20 within the distance).
    const union = (...lists: string[][]) => [...new Set(lists.flat())].sort();
    for (const d of [7, 13, 20, 21]) {
      const previous = stored();
      setDistance(d);
      const t0 = performance.now();
      await scanRound(app);
      console.log(`rescan at distance ${d}: ${(performance.now() - t0).toFixed(0)} ms, ${stored().length} pairs`);
      expect(stored()).toEqual(union(previous, cappedPairs([liveById(app.db)], d)));
    }
    expect(bruteForce(live(), 21).length).toBeGreaterThan(cappedPairs([liveById(app.db)], 21).length);
    // Lowered: pairs already listed stay; blobs scanned from now on are paired within the new distance only.
    setDistance(5);
    const before = stored();
    const old = liveById(app.db);
    const fresh: { id: number; phash: string }[] = [];
    for (const phash of population(150, random)) fresh.push({ id: add(phash), phash });
    await scanRound(app);
    const involvesNew = (p: string) =>
      p
        .split("-")
        .slice(0, 2)
        .some((id) => fresh.some((f) => f.id === Number(id)));
    expect(stored()).toEqual(union(before, cappedPairs([old, fresh], 5).filter(involvesNew)));
    // Raised again: what was scanned at 5 meanwhile is rescanned too.
    const beforeRaise = stored();
    setDistance(9);
    await scanRound(app);
    expect(stored()).toEqual(union(beforeRaise, cappedPairs([liveById(app.db)], 9)));
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("the rescan is exact up to the largest allowed distance (64: every pair, each blob's 20 nearest kept)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-64-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const insert = app.db.query(
      `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, created_at)
       VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, '2026-01-01 00:00:00')`,
    );
    const hashes = population(60, rng(64));
    for (const [i, h] of hashes.entries()) insert.run(`sha-${i}`, h);
    await scanRound(app);
    const blobs = app.db.query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs ORDER BY id").all();
    let expected = bruteForce(blobs, 6);
    for (const d of [35, 64]) {
      app.settings.update({ dedup_phash_max_distance: d });
      await scanRound(app);
      const stored = app.db.query<{ p: string }, []>("SELECT blob_a || '-' || blob_b || '-' || distance AS p FROM dedup_candidates").all();
      expected = [...new Set([...expected, ...cappedPairs([blobs], d)])].sort();
      expect(stored.map((r) => r.p).sort()).toEqual(expected);
    }
    expect(bruteForce(blobs, 64)).toHaveLength((60 * 59) / 2);
    // At 64 every blob is within reach of every other: blob k (from 0) gets min(k, 20) pairs.
    expect(cappedPairs([blobs], 64)).toHaveLength((20 * 19) / 2 + 40 * 20);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test("a stop ends a long rescan at once; a start at another distance rescans from the first blob", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-stop-"));
  let ctx = await openContext(dir);
  try {
    const add = blobInserter(ctx.app.db);
    ctx.app.db.transaction(() => {
      for (const h of population(10_000, rng(5))) add(h);
    })();
    await scanRound(ctx.app);
    const pairs = () => ctx.app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM dedup_candidates").get()!.n;
    const atSix = pairs();
    // Distance 40 is within reach of nearly all of the 50 million pairs: 200k pairs kept (20 a blob), a rescan far longer than this test.
    ctx.app.settings.update({ dedup_phash_max_distance: 40 });
    const round = scanRound(ctx.app);
    await Bun.sleep(500);
    const t0 = performance.now();
    stopRescans(ctx.app);
    expect(await round).toMatchObject({ compared: 0 });
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(ctx.logs.some((l) => l.msg === "服务正在停止，相似图片重新扫描将在下次启动后继续")).toBe(true);
    ctx.close();
    // After a restart at a smaller raise, the rescan is still owed (the watermark kept distance 6), from the start.
    ctx = await openContext(dir);
    ctx.app.settings.update({ dedup_phash_max_distance: 9 });
    const before = pairs();
    expect(before).toBeGreaterThanOrEqual(atSix);
    await scanRound(ctx.app);
    expect(ctx.logs.some((l) => l.msg === "相似图片重新扫描完成")).toBe(true);
    expect(ctx.logs.some((l) => l.msg === "继续上次中断的相似图片重新扫描")).toBe(false);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test("a rescan stopped part way goes on after its last stored batch at the next start, and loses no pair", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-resume-"));
  let ctx = await openContext(dir);
  try {
    const add = blobInserter(ctx.app.db);
    ctx.app.db.transaction(() => {
      for (const h of population(3_000, rng(77))) add(h);
    })();
    await scanRound(ctx.app);
    const atSix = storedPairs(ctx.app.db);
    // Distance 40 pairs nearly everything: ~60k pairs (20 a blob), many batches of 1,000.
    ctx.app.settings.update({ dedup_phash_max_distance: 40 });
    const progress = () => (JSON.parse(readMeta(ctx.app.db, "dedup_scan_watermark") ?? "{}") as { rescan?: { distance: number; through: number } }).rescan;
    const round = scanRound(ctx.app);
    // Stopped once a few batches are stored.
    while ((progress()?.through ?? 0) < 300) await Bun.sleep(2);
    stopRescans(ctx.app);
    await round;
    await Bun.sleep(200); // the batch being stored when the stop came finishes, and notes itself
    const saved = progress()!;
    expect(saved.distance).toBe(40);
    expect(saved.through).toBeGreaterThanOrEqual(300);
    expect(saved.through).toBeLessThan(Math.max(...liveById(ctx.app.db).map((b) => b.id)));
    ctx.close();

    ctx = await openContext(dir);
    await scanRound(ctx.app);
    const resumed = ctx.logs.find((l) => l.msg === "继续上次中断的相似图片重新扫描");
    expect(resumed).toBeDefined();
    expect(resumed!.fields?.after).toBe(saved.through);
    expect(ctx.logs.some((l) => l.msg === "相似图片重新扫描完成")).toBe(true);
    // Exactly the pairs of an uninterrupted rescan, and the watermark forgets the rescan once done.
    expect(storedPairs(ctx.app.db)).toEqual([...new Set([...atSix, ...cappedPairs([liveById(ctx.app.db)], 40)])].sort());
    expect(progress()).toBeUndefined();
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
