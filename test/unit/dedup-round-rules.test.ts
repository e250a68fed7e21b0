// Near-duplicate detection's decisions, each judged exactly on a real context: a scan round stores
// each pair once (blob_a < blob_b), never a blob with itself, honours the threshold setting on both
// sides, and reads a damaged watermark as a fresh start; a merge refuses what it must and refills
// the kept blob's pairs; a stop between slices goes on where it was. The index itself:
// phash-index-rules.test.ts.
import type { Database } from "bun:sqlite";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deleteMeta, readMeta, writeMeta } from "../../src/db/meta";
import { dismiss, merge, scanRound, stopRescans } from "../../src/images/dedup";
import { PhashIndex, phashToInt } from "../../src/images/phash-index";
import { insertCandidate } from "../../src/images/repos/dedup";
import { SYSTEM_ACTOR } from "../../src/ops/audit";
import { type CapturedLog, openContext as openSharedContext } from "../helpers/context";
import { bruteForce, cappedPairs, flip, liveById, outcome, population, rng, storedPairs } from "../helpers/phashes";

/** The real context without the built-in admin; a plain user owns the images instead. */
async function openContext(dataDir: string) {
  const opened = await openSharedContext(dataDir, { admin: false });
  opened.app.db.query("INSERT OR IGNORE INTO users (id, name, role, password_hash, created_at) VALUES ('u1', 'u1', 'user', '!', '2026-01-01 00:00:00')").run();
  return opened;
}

describe("scan rounds and merges", () => {
  let dir: string;
  let ctx: Awaited<ReturnType<typeof openContext>>;
  const KEY = "dedup_scan_watermark";
  let n = 0;
  const add = (phash: string, pendingDelete = 0) =>
    Number(
      ctx.app.db
        .query(
          `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
           VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
        )
        .run(`sha-${n++}`, phash, pendingDelete).lastInsertRowid,
    );
  const mark = () => JSON.parse(readMeta(ctx.app.db, KEY) ?? "null");
  const setDistance = (d: number) => ctx.app.settings.update({ dedup_phash_max_distance: d });
  const logged = (msg: string): CapturedLog[] => ctx.logs.filter((l) => l.msg === msg);
  const BASE = "5bd1e9955bd1e995";
  /** Blobs at exact distances 0–8 from BASE (bits spread over every chunk), an unrelated one, and BASE itself. */
  const planted = () => [
    BASE,
    ...Array.from({ length: 9 }, (_, d) => flip(BASE, ...Array.from({ length: d }, (_, i) => (i * 9 + 5) % 64))),
    "a1b2c3d4e5f60718",
  ];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-"));
    ctx = await openContext(dir);
  });
  afterAll(() => {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    setDistance(6);
    ctx.app.db.exec("DELETE FROM dedup_candidates; DELETE FROM phash_index; DELETE FROM jobs; DELETE FROM images; DELETE FROM blobs; DELETE FROM audit");
    deleteMeta(ctx.app.db, KEY);
    ctx.logs.length = 0;
  });

  for (const d of [0, 1, 5, 6, 7])
    test(`the threshold setting at ${d}: exactly the pairs within ${d}, each once, blob_a < blob_b, never a blob with itself`, async () => {
      setDistance(d);
      const blobs = planted().map((phash) => ({ id: add(phash), phash }));
      const expected = bruteForce(blobs, d);
      expect(expected.length).toBeGreaterThan(0);
      expect(await scanRound(ctx.app)).toEqual({ compared: blobs.length, found: expected.length });
      expect(storedPairs(ctx.app.db)).toEqual(expected);
      expect(ctx.app.db.query("SELECT count(*) AS n FROM dedup_candidates WHERE blob_a >= blob_b OR state != 'pending'").get()).toEqual({ n: 0 });
      expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: d });
      expect(logged("相似图片扫描完成").map((l) => l.fields)).toEqual([{ compared: blobs.length, found: expected.length }]);
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(storedPairs(ctx.app.db)).toEqual(expected);
      // A round that found nothing says nothing.
      expect(logged("相似图片扫描完成")).toHaveLength(1);
    });

  test("blobs not ready wait: unhashed, pending delete, deleted meanwhile; a malformed hash is never compared", async () => {
    const a = add(BASE);
    const unhashed = add("");
    const pending = add(flip(BASE, 1), 1);
    const malformed = add(`${BASE}0`); // 17 digits
    const short = add(BASE.slice(1)); // 15 digits
    const gone = add("");
    const b = add(flip(BASE, 2, 3));
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 1 });
    expect(storedPairs(ctx.app.db)).toEqual([`${a}-${b}-2`]);
    expect(mark()).toEqual({ after: b, waiting: [unhashed, pending, gone], distance: 6 });

    ctx.app.db.query("UPDATE blobs SET phash = ? WHERE id = ?").run(flip(BASE, 4), unhashed);
    ctx.app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(pending);
    ctx.app.db.query("DELETE FROM blobs WHERE id = ?").run(gone);
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 5 });
    expect(storedPairs(ctx.app.db)).toEqual(
      [`${a}-${b}-2`, `${a}-${unhashed}-1`, `${unhashed}-${b}-3`, `${a}-${pending}-1`, `${unhashed}-${pending}-2`, `${pending}-${b}-3`].sort(),
    );
    expect(mark()).toEqual({ after: b, waiting: [], distance: 6 });
    expect([malformed, short].every((id) => id < b)).toBe(true);
  });

  test("one blob still waiting and one new blob: the watermark moves past the new one", async () => {
    const a = add(BASE);
    const unhashed = add("");
    await scanRound(ctx.app);
    expect(mark()).toEqual({ after: unhashed, waiting: [unhashed], distance: 6 });
    const b = add(flip(BASE, 7));
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 1 });
    expect(mark()).toEqual({ after: b, waiting: [unhashed], distance: 6 });
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(storedPairs(ctx.app.db)).toEqual([`${a}-${b}-1`]);
  });

  test("a blob that goes pending delete waits again, and nothing else is written while nothing changes", async () => {
    const a = add(BASE);
    const b = add(flip(BASE, 9));
    await scanRound(ctx.app);
    // Written by hand in another key order: a round with nothing to do leaves the row as it is.
    const text = `{"waiting":[],"distance":6,"after":${b}}`;
    writeMeta(ctx.app.db, KEY, text);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(readMeta(ctx.app.db, KEY)).toBe(text);

    ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(a);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(mark()).toEqual({ after: b, waiting: [a], distance: 6 });

    ctx.app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(a);
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 0 });
    expect(mark()).toEqual({ after: b, waiting: [], distance: 6 });

    // A new blob alone (nothing else changed) moves the watermark on.
    const c = add(flip(BASE, 9, 10));
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 2 });
    expect(mark()).toEqual({ after: c, waiting: [], distance: 6 });
  });

  const watermarks: { rule: string; text: (after: number) => string; compared: number }[] = [
    { rule: "not JSON: a fresh start", text: () => "{", compared: 4 },
    { rule: "`after` not a whole number: a fresh start", text: (after) => `{"after":${after - 0.5},"waiting":[],"distance":6}`, compared: 4 },
    { rule: "`after` as text: a fresh start", text: (after) => `{"after":"${after}","waiting":[],"distance":6}`, compared: 4 },
    { rule: "`waiting` not a list: a fresh start", text: (after) => `{"after":${after},"waiting":5,"distance":6}`, compared: 4 },
    { rule: "`distance` as text: a fresh start", text: (after) => `{"after":${after},"waiting":[],"distance":"6"}`, compared: 4 },
    {
      rule: "a rescan note without `through`: a fresh start",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":6}}`,
      compared: 4,
    },
    {
      rule: "a rescan note whose distance is text: a fresh start",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":"6","through":1}}`,
      compared: 4,
    },
    { rule: "valid: nothing new", text: (after) => `{"after":${after},"waiting":[],"distance":6}`, compared: 0 },
    { rule: "valid, from a version without `distance`: nothing new", text: (after) => `{"after":${after},"waiting":[]}`, compared: 0 },
    {
      rule: "valid, with a rescan note: nothing new",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":6,"through":1}}`,
      compared: 0,
    },
  ];
  for (const row of watermarks)
    test(`the watermark read back: ${row.rule}`, async () => {
      const ids = [BASE, flip(BASE, 1), flip(BASE, 30, 31), "0123456789abcdef"].map((h) => add(h));
      expect(await scanRound(ctx.app)).toEqual({ compared: 4, found: 3 });
      const after = ids.at(-1)!;
      writeMeta(ctx.app.db, KEY, row.text(after));
      expect(await scanRound(ctx.app)).toEqual({ compared: row.compared, found: 0 });
      expect(storedPairs(ctx.app.db)).toHaveLength(3);
      expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
      if (row.compared) expect(mark()).toEqual({ after, waiting: [], distance: 6 });
    });

  test("a raised setting rescans what was compared with the smaller one; a lowered one is noted, so raising it again rescans", async () => {
    setDistance(4);
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    await scanRound(ctx.app);
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 4));
    setDistance(6);
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: bruteForce(blobs, 6).length - bruteForce(blobs, 4).length });
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 6));
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
    expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: 6 });

    setDistance(3);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: 3 });
    setDistance(6);
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
    // The same setting again: nothing to rescan.
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
  });

  test("nothing compared yet: a raised setting needs no rescan", async () => {
    writeMeta(ctx.app.db, KEY, '{"after":0,"waiting":[],"distance":3}');
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    expect(await scanRound(ctx.app)).toEqual({ compared: blobs.length, found: bruteForce(blobs, 6).length });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
  });

  test("a rescan note at the current setting goes on after its `through`; one at another setting starts over", async () => {
    setDistance(4);
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    await scanRound(ctx.app);
    const through = blobs[4]!.id;
    const after = blobs.at(-1)!.id;
    setDistance(6);
    writeMeta(ctx.app.db, KEY, JSON.stringify({ after, waiting: [], distance: 4, rescan: { distance: 6, through } }));
    await scanRound(ctx.app);
    const owner = (p: string) => Number(p.split("-")[1]);
    expect(storedPairs(ctx.app.db)).toEqual([...new Set([...bruteForce(blobs, 4), ...cappedPairs([blobs], 6).filter((p) => owner(p) > through)])].sort());
    expect(logged("继续上次中断的相似图片重新扫描").map((l) => l.fields)).toEqual([{ distance: 6, after: through }]);
    expect(mark()).toEqual({ after, waiting: [], distance: 6 });

    ctx.app.db.exec("DELETE FROM dedup_candidates");
    ctx.logs.length = 0;
    writeMeta(ctx.app.db, KEY, JSON.stringify({ after, waiting: [], distance: 4, rescan: { distance: 5, through } }));
    await scanRound(ctx.app);
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 6));
    expect(logged("继续上次中断的相似图片重新扫描")).toEqual([]);
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
  });

  describe("merge", () => {
    const pair = (a: number, b: number, d = 1) => {
      insertCandidate(ctx.app.db, a, b, d, "2026-01-01 00:00:00");
      return ctx.app.db.query<{ id: number }, [number, number]>("SELECT id FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?").get(a, b)!.id;
    };
    const state = (id: number) => ctx.app.db.query<{ state: string }, [number]>("SELECT state FROM dedup_candidates WHERE id = ?").get(id)?.state;
    const pendingDelete = (id: number) => ctx.app.db.query<{ p: number }, [number]>("SELECT pending_delete AS p FROM blobs WHERE id = ?").get(id)!.p;
    const audits = () => ctx.app.db.query<{ action: string; target: string; detail: string }, []>("SELECT action, target, detail FROM audit ORDER BY id").all();

    const refusals: { rule: string; setup: (a: number, b: number, c: number) => [number, number]; answer: string }[] = [
      { rule: "an unknown pair", setup: () => [999_999, 1], answer: "NotFound: 相似候选不存在" },
      {
        rule: "a pair already decided",
        setup: (a, b) => {
          const id = pair(a, b);
          ctx.app.db.query("UPDATE dedup_candidates SET state = 'dismissed' WHERE id = ?").run(id);
          return [id, a];
        },
        answer: "Conflict: 该相似候选已处理",
      },
      { rule: "keeping a blob outside the pair", setup: (a, b, c) => [pair(a, b), c], answer: "Invalid: keep_blob_id 必须是该候选中的一方" },
      {
        rule: "the kept blob waits for its delete",
        setup: (a, b) => {
          ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(a);
          return [pair(a, b), a];
        },
        answer: "Conflict: 候选中的图片已被删除，无法合并",
      },
      {
        rule: "the other blob waits for its delete",
        setup: (a, b) => {
          ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(b);
          return [pair(a, b), a];
        },
        answer: "Conflict: 候选中的图片已被删除，无法合并",
      },
    ];
    for (const row of refusals)
      test(`refused: ${row.rule}`, () => {
        const [a, b, c] = [add(BASE), add(flip(BASE, 1)), add(flip(BASE, 2))];
        const [id, keep] = row.setup(a, b, c);
        const before = storedPairs(ctx.app.db);
        expect(outcome(() => merge(ctx.app, id, keep, SYSTEM_ACTOR))).toBe(row.answer);
        expect(storedPairs(ctx.app.db)).toEqual(before);
        expect(audits()).toEqual([]);
        expect(ctx.app.db.query("SELECT count(*) AS n FROM jobs").get()).toEqual({ n: 0 });
      });

    for (const keepSide of ["blob_a", "blob_b"] as const)
      test(`keeping ${keepSide}: the other waits for its delete, its other pending pairs are dismissed, the kept blob's stay`, () => {
        const [a, b, x, y] = [add(BASE), add(flip(BASE, 1)), add(flip(BASE, 2)), add(flip(BASE, 3))];
        const ab = pair(a, b);
        const [keep, removed] = keepSide === "blob_a" ? [a, b] : [b, a];
        const removedsOther = pair(Math.min(removed, x), Math.max(removed, x));
        const keptsOther = pair(Math.min(keep, y), Math.max(keep, y));
        const image = `img-${keepSide}`;
        ctx.app.db
          .query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, ?, 'a.jpg', '2026-01-01 00:00:00')")
          .run(image, removed, "u1");
        // Delivery has the image's row cached: the merge makes it read the row again.
        expect(ctx.app.lookups.byId(image)?.blob_id).toBe(removed);
        merge(ctx.app, ab, keep, SYSTEM_ACTOR);
        expect(ctx.app.lookups.byId(image)?.blob_id).toBe(keep);
        expect([state(ab), state(removedsOther), state(keptsOther)]).toEqual(["merged", "dismissed", "pending"]);
        expect([pendingDelete(keep), pendingDelete(removed)]).toEqual([0, 1]);
        expect(audits()).toEqual([
          { action: "dedup.merge", target: String(ab), detail: JSON.stringify({ keep_blob_id: keep, removed_blob_id: removed, images: 1 }) },
        ]);
        expect(outcome(() => merge(ctx.app, ab, keep, SYSTEM_ACTOR))).toBe("Conflict: 该相似候选已处理");
      });

    /** Bits flipped from BASE: each partner's (a pending pair with the kept blob before the merge) and each unpaired newcomer's. */
    const refills: { rule: string; partners: number[][]; newcomers: number[][]; added: number[] }[] = [
      {
        rule: "19 pending pairs left: one more, the nearest unpaired, though the partners are nearer still",
        partners: Array.from({ length: 19 }, (_, i) => [i + 1]),
        newcomers: [
          [40, 41, 42],
          [43, 44, 45],
          [46, 47, 48],
        ],
        added: [0],
      },
      {
        rule: "20 pending pairs left: none",
        partners: Array.from({ length: 20 }, (_, i) => [i + 1]),
        newcomers: [
          [40, 41, 42],
          [43, 44, 45],
        ],
        added: [],
      },
      {
        rule: "21 pending pairs left (more than a scan gives): none, though unpaired blobs are nearer",
        partners: Array.from({ length: 21 }, (_, i) => [2 * i + 1, 2 * i + 2]),
        newcomers: [[50], [51], [52]],
        added: [],
      },
    ];
    for (const row of refills)
      test(`refill after a merge: ${row.rule}`, () => {
        const keep = add(BASE);
        const removed = add(flip(BASE, 0));
        const ab = pair(keep, removed);
        for (const bits of row.partners) pair(keep, add(flip(BASE, ...bits)), bits.length);
        const dismissedOne = add(flip(BASE, 60, 61));
        ctx.app.db.query("UPDATE dedup_candidates SET state = 'dismissed' WHERE id = ?").run(pair(keep, dismissedOne, 2));
        const newcomers = row.newcomers.map((bits) => ({ id: add(flip(BASE, ...bits)), d: bits.length }));
        add(flip(BASE, 53, 54, 55, 56, 57, 58, 59)); // 7 away: out of reach
        const index = new PhashIndex(ctx.app.db);
        for (const b of ctx.app.db.query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs").all()) index.add(b.id, phashToInt(b.phash));
        merge(ctx.app, ab, keep, SYSTEM_ACTOR);
        const added = ctx.app.db
          .query<{ p: string }, [number, number, string]>(
            "SELECT blob_a || '-' || blob_b || '-' || distance AS p FROM dedup_candidates WHERE (blob_a = ? OR blob_b = ?) AND created_at != ? ORDER BY id",
          )
          .all(keep, keep, "2026-01-01 00:00:00")
          .map((r) => r.p);
        expect(added).toEqual(row.added.map((k) => `${keep}-${newcomers[k]!.id}-${newcomers[k]!.d}`));
        expect(state(ab)).toBe("merged");
      });

    test("a kept blob without a hash merges without a refill", () => {
      const keep = add("");
      const removed = add(BASE);
      add(flip(BASE, 1));
      const ab = pair(keep, removed);
      merge(ctx.app, ab, keep, SYSTEM_ACTOR);
      expect(storedPairs(ctx.app.db)).toEqual([`${keep}-${removed}-1`]);
    });

    test("above distance 6 the kept blob waits for the next round's worker (once, in id order), unless the scan has not reached it", async () => {
      setDistance(8);
      const [a, b, w, c, d] = [BASE, flip(BASE, 1), flip(BASE, 20, 21, 22, 23, 24, 25, 26, 27), flip(BASE, 2), flip(BASE, 3)].map((h) => add(h)) as [
        number,
        number,
        number,
        number,
        number,
      ];
      await scanRound(ctx.app);
      expect(mark()).toEqual({ after: d, waiting: [], distance: 8 });
      const scanned = storedPairs(ctx.app.db);
      writeMeta(ctx.app.db, KEY, JSON.stringify({ after: d, waiting: [w], distance: 8 }));
      const idOf = (x: number, y: number) =>
        ctx.app.db.query<{ id: number }, [number, number]>("SELECT id FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?").get(x, y)!.id;
      merge(ctx.app, idOf(a, b), a, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w], distance: 8 });
      // The last blob the scan reached is reached.
      merge(ctx.app, idOf(a, d), d, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      merge(ctx.app, idOf(c, d), d, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      // Kept blobs the scan has not reached yet are compared by it anyway.
      const e = add(flip(BASE, 4));
      const f = add(flip(BASE, 5));
      merge(ctx.app, pair(e, f), f, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      // No pair was added on the spot: the worker's round pairs them.
      expect(storedPairs(ctx.app.db)).toEqual([...scanned, `${e}-${f}-1`].sort());
    });
  });

  test("dismiss: the pair is never suggested again, even by a full rescan", async () => {
    const a = add(BASE);
    const b = add(flip(BASE, 5));
    await scanRound(ctx.app);
    const id = ctx.app.db.query<{ id: number }, []>("SELECT id FROM dedup_candidates").get()!.id;
    expect(outcome(() => dismiss(ctx.app, 999_999, SYSTEM_ACTOR))).toBe("NotFound: 相似候选不存在");
    dismiss(ctx.app, id, SYSTEM_ACTOR);
    expect(outcome(() => dismiss(ctx.app, id, SYSTEM_ACTOR))).toBe("Conflict: 该相似候选已处理");
    expect(ctx.app.db.query("SELECT action, target, detail FROM audit").all()).toEqual([
      { action: "dedup.dismiss", target: String(id), detail: JSON.stringify({ blob_a: a, blob_b: b }) },
    ]);
    deleteMeta(ctx.app.db, KEY);
    ctx.app.db.exec("DELETE FROM phash_index");
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 0 });
    expect(ctx.app.db.query("SELECT state FROM dedup_candidates").all()).toEqual([{ state: "dismissed" }]);
  });
});

describe("a stop between slices", () => {
  const insertSql = `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
     VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, 0, '2026-01-01 00:00:00')`;
  const watermark = (app: { db: Database }) => JSON.parse(readMeta(app.db, "dedup_scan_watermark") ?? "null");

  test("among new blobs: the watermark keeps the pairs stored so far; the next start loses no pair", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-stop-"));
    let ctx = await openContext(dir);
    try {
      stopRescans(ctx.app);
      // Nothing to compare, a lowered setting: still noted, though the service is stopping.
      ctx.app.settings.update({ dedup_phash_max_distance: 5 });
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(watermark(ctx.app)).toEqual({ after: 0, waiting: [], distance: 5 });
      ctx.app.settings.update({ dedup_phash_max_distance: 6 });

      const insert = ctx.app.db.query(insertSql);
      const unhashed: number[] = [];
      let last = 0;
      ctx.app.db.transaction(() => {
        population(2000, rng(20261129)).forEach((h, i) => {
          last = Number(insert.run(`sha-${i}`, i % 50 === 7 ? "" : h).lastInsertRowid);
          if (i % 50 === 7) unhashed.push(last);
        });
      })();
      const first = await scanRound(ctx.app);
      const live = liveById(ctx.app.db);
      // The stop came between slices: at least one blob compared, not all of them. (How many a slice
      // takes depends on the machine: on a busy CI core the first, cold one took a single blob.)
      expect(first.compared).toBeGreaterThanOrEqual(1);
      expect(first.compared).toBeLessThan(live.length);
      expect(ctx.logs.filter((l) => l.msg === "服务正在停止，相似图片扫描将在下次启动后继续").map((l) => l.fields)).toEqual([{ compared: first.compared }]);
      const saved = watermark(ctx.app);
      // The last blob read: the last one compared, or a blob not hashed yet read after it.
      expect(saved.after).toBeGreaterThanOrEqual(live[first.compared - 1]!.id);
      expect(saved.after).toBeLessThan(live[first.compared]!.id);
      expect(saved).toEqual({ after: saved.after, waiting: unhashed.filter((id) => id <= saved.after), distance: 6 });
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live.slice(0, first.compared)], 6));
      ctx.close();

      ctx = await openContext(dir);
      const second = await scanRound(ctx.app);
      expect(second.compared).toBe(live.length - first.compared);
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live], 6));
      expect(watermark(ctx.app)).toEqual({ after: last, waiting: unhashed, distance: 6 });
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  test("among waiting blobs: the ones not reached still wait, in id order with those not ready", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-stop-waiting-"));
    let ctx = await openContext(dir);
    try {
      const insert = ctx.app.db.query(insertSql);
      const ids: number[] = [];
      ctx.app.db.transaction(() => {
        for (let i = 0; i < 2000; i++) ids.push(Number(insert.run(`sha-${i}`, "").lastInsertRowid));
      })();
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: ids, distance: 6 });
      // All hashed now but every 50th, which keeps waiting.
      const hashes = population(2000, rng(77));
      const setHash = ctx.app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
      const unhashed = ids.filter((_, i) => i % 50 === 7);
      ctx.app.db.transaction(() => {
        for (const [i, id] of ids.entries()) if (i % 50 !== 7) setHash.run(hashes[i]!, id);
      })();
      const live = liveById(ctx.app.db);

      stopRescans(ctx.app);
      const first = await scanRound(ctx.app);
      expect(first.compared).toBeGreaterThan(0);
      expect(first.compared).toBeLessThan(live.length);
      const notReached = new Set([...unhashed, ...live.slice(first.compared).map((b) => b.id)]);
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: ids.filter((id) => notReached.has(id)), distance: 6 });
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live.slice(0, first.compared)], 6));
      ctx.close();

      ctx = await openContext(dir);
      expect((await scanRound(ctx.app)).compared).toBe(live.length - first.compared);
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live], 6));
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: unhashed, distance: 6 });
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
