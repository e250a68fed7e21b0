/**
 * A burst of near-identical uploads (audit 10 HIGH-2): 1,300 copies of one photo made one scan
 * round store ~350k pairs in transactions of 100 blobs, each holding the loop 4.6-5.6 s. A round
 * now compares blobs in ~10 ms slices and keeps each blob's 20 nearest pairs; a stop between
 * slices loses nothing (the watermark is saved with each slice's pairs).
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WalCheckpointer } from "../../src/db/checkpointer";
import { readMeta } from "../../src/db/meta";
import { scanRound, stopRescans } from "../../src/images/dedup";
import { phashToInt } from "../../src/images/phash-index";
import { phashStatements } from "../../src/images/repos/phash";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";
import { blobInserter, cappedPairs, hex64, population, rng, storedPairs } from "../helpers/phashes";

const BURST = 600;

/** `count` hashes within 3 bits of one base (so within 6 of each other), and unrelated ones between. */
function burst(count: number, random: () => number): string[] {
  const base = (BigInt(Math.floor(random() * 2 ** 32)) << 32n) | BigInt(Math.floor(random() * 2 ** 32));
  const others = population(count, random);
  return Array.from({ length: count }, (_, i) => {
    if (i % 5 === 4) return others[i]!;
    let h = base;
    for (let f = Math.floor(random() * 4); f > 0; f--) h ^= 1n << BigInt(Math.floor(random() * 64));
    return hex64(h);
  });
}

test(`a round over ${BURST} near-identical blobs runs in short slices and keeps each blob's 20 nearest pairs`, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-burst-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const add = blobInserter(app.db);
    const blobs = burst(BURST, rng(1300)).map((phash) => ({ id: add(phash), phash }));

    // Checkpoints off the loop, as the server runs them: otherwise a slice's commit that crosses 1,000 WAL pages copies
    // and syncs the WAL inline (a commit of 8-12 ms measured), a pause the service never has.
    const checkpointer = new WalCheckpointer(app.db, { warn: () => {} });
    checkpointer.start();
    const { value: round, totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => scanRound(app)).finally(() => checkpointer.stop());
    console.log(`round over a burst of ${BURST}: ${total.toFixed(0)} ms, ${round.found} pairs, longest loop pause ${longest.toFixed(1)} ms`);

    expect(round.compared).toBe(BURST);
    const expected = cappedPairs([blobs], 6);
    expect(storedPairs(app.db)).toEqual(expected);
    // ~480 blobs within reach of each other: ~115k pairs uncapped, at most 20 a blob with the cap.
    expect(expected.length).toBeLessThanOrEqual(20 * BURST);
    expect(expected.length).toBeGreaterThan(15 * BURST * 0.8 - 300);
    // Whole transactions of 100 blobs are pauses of a sixth of the round or more; slices are ~10 ms (relative: a loaded machine adds its own).
    expect(longest).toBeLessThan(total / 8);

    // Blobs waiting for their physical delete are no one's neighbour (the probe reads the index alone, the nearest
    // rows are checked): the lowest ids of the cluster, every new copy's first choice, are skipped for the next ones.
    const gone = new Set(
      blobs
        .filter((_, i) => i % 5 !== 4)
        .slice(0, 30)
        .map((b) => b.id),
    );
    for (const id of gone) app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(id);
    const before = storedPairs(app.db);
    // New copies: cluster members with one more bit flipped.
    const fresh = blobs
      .filter((_, i) => i % 5 !== 4)
      .slice(0, 60)
      .map((b, i) => hex64(phashToInt(b.phash) ^ (1n << BigInt((i * 13) % 64))))
      .map((phash) => ({ id: add(phash), phash }));
    await scanRound(app);
    const freshIds = new Set(fresh.map((b) => b.id));
    const involvesFresh = (p: string) =>
      p
        .split("-")
        .slice(0, 2)
        .some((id) => freshIds.has(Number(id)));
    expect(storedPairs(app.db).filter((p) => !before.includes(p))).toEqual(cappedPairs([blobs.filter((b) => !gone.has(b.id)), fresh], 6).filter(involvesFresh));
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("a round stopped between slices resumes after a start where it was: no pair lost, waiting blobs kept", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-burst-stop-"));
  let ctx = await openContext(dir);
  try {
    const add = blobInserter(ctx.app.db);
    const hashes = burst(BURST, rng(77));
    // Every 50th is not hashed yet at the first round.
    const blobs = hashes.map((phash, i) => ({ id: add(i % 50 === 7 ? "" : phash), phash }));
    setTimeout(() => stopRescans(ctx.app), 40);
    const first = await scanRound(ctx.app);
    expect(ctx.logs.some((l) => l.msg.includes("相似图片扫描将在下次启动后继续"))).toBe(true);
    const mark = JSON.parse(readMeta(ctx.app.db, "dedup_scan_watermark")!) as { after: number; waiting: number[] };
    const unhashed = blobs.filter((_, i) => i % 50 === 7);
    const done = blobs.filter((b, i) => b.id <= mark.after && i % 50 !== 7);
    console.log(`stopped after ${first.compared} of ${BURST} blobs, watermark at ${mark.after}`);
    expect(first.compared).toBe(done.length);
    expect(first.compared).toBeGreaterThan(0);
    expect(mark.after).toBeLessThan(blobs.at(-1)!.id);
    expect(mark.waiting).toEqual(unhashed.filter((b) => b.id <= mark.after).map((b) => b.id));
    expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([done], 6));
    ctx.close();

    ctx = await openContext(dir);
    const setHash = ctx.app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
    for (const u of unhashed) setHash.run(u.phash, u.id);
    const second = await scanRound(ctx.app);
    expect(first.compared + second.compared).toBe(BURST);
    // The waiting ones first, then the rest in id order (those not hashed before are now in the range).
    const rest = blobs.filter((b) => b.id > mark.after);
    expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([done, unhashed.filter((b) => b.id <= mark.after), rest], 6));
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("a probe reads the hash index alone: no blob row per index row (~30 ms a probe at a million blobs)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-probe-"));
  const ctx = await openContext(dir);
  try {
    // The statement's SQL (parameters as NULL), and the tables its plan touches.
    const sql = String(phashStatements(ctx.app.db).probe);
    const plan = ctx.app.db
      .query<{ detail: string }, []>(`EXPLAIN QUERY PLAN ${sql}`)
      .all()
      .map((r) => r.detail);
    expect(plan.join(" | ")).toMatch(/phash_index/);
    expect(plan.join(" | ")).not.toMatch(/blobs/);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
