/**
 * A round of new blobs compared in a worker (distance above 6, where the index cannot answer)
 * must not stall the event loop over a large library: the loop only stores pairs and indexes
 * slices. Alone in the suite's serial group: the bound is on the loop's pauses.
 */
import type { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMeta, writeMeta } from "../../src/db/meta";
import { scanRound } from "../../src/images/dedup";
import { CHUNK_BITS, phashChunks, phashToInt } from "../../src/images/phash-index";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";
import { blobInserter, halves, hex64, liveBlobs, popcount32, population, rng, storedPairs } from "../helpers/phashes";

const INDEXED = 250_000;

test(`a round of 100 new blobs at distance 9 over ${INDEXED} indexed hashes keeps the event loop responsive`, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-dedup-pause-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const add = blobInserter(app.db);
    const random = rng(424242);
    // A library already scanned: blobs and their index rows written directly, the watermark past them.
    const t0 = performance.now();
    const after = seedIndexedLibrary(app.db, population(INDEXED, random), add);
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

/**
 * Blobs with `hashes`, and their phash_index rows as the scan writes them (`phashChunks`), made in SQL
 * in key order: row by row from JS, 1.75 million rows took 15 s of a 20 s test. Returns the last id.
 */
function seedIndexedLibrary(db: Database, hashes: string[], add: (phash: string) => number): number {
  let after = 0;
  // Where each chunk starts in the 64-bit hash, from the same CHUNK_BITS phashChunks splits it by.
  const chunks = CHUNK_BITS.map((bits, chunk) => ({ chunk, shift: CHUNK_BITS.slice(0, chunk).reduce((a, b) => a + b, 0), mask: 2 ** bits - 1 }));
  const chunkTable = chunks.map((c) => `SELECT ${c.chunk} AS chunk, ${c.shift} AS shift, ${c.mask} AS mask`).join(" UNION ALL ");
  // The blob_id index built once at the end (filled row by row it is written out of order), and no
  // foreign-key probe per row (every blob_id is a blob just inserted): 8 s of SQLite work → 5 s.
  const blobIdIndex = db.query<{ sql: string }, []>("SELECT sql FROM sqlite_master WHERE name = 'phash_index_blob'").get()!.sql;
  db.run("DROP INDEX phash_index_blob");
  db.run("PRAGMA foreign_keys = OFF");
  db.run("CREATE TEMP TABLE seeded (id INTEGER PRIMARY KEY, hash INTEGER NOT NULL)");
  const seeded = db.query("INSERT INTO seeded (id, hash) VALUES (?, ?)");
  db.transaction(() => {
    for (const h of hashes) {
      after = add(h);
      seeded.run(after, phashToInt(h));
    }
    // SQLite's >> keeps the sign of a negative hash; the mask drops those bits, as phashChunks' unsigned view does.
    db.run(
      `INSERT INTO phash_index (chunk, value, blob_id, hash)
       SELECT c.chunk, (s.hash >> c.shift) & c.mask, s.id, s.hash FROM seeded s, (${chunkTable}) c ORDER BY 1, 2, 3`,
    );
    db.run(blobIdIndex);
  })();
  db.run("PRAGMA foreign_keys = ON");
  db.run("DROP TABLE seeded");
  // The SQL split must be phashChunks' split: checked on a sample against the function itself.
  const rows = db.query<{ value: number; hash: string }, [number]>(
    "SELECT value, CAST(hash AS TEXT) AS hash FROM phash_index WHERE blob_id = ? ORDER BY chunk",
  );
  for (const id of [1, 2, 3, Math.floor(after / 2), after]) {
    const got = rows.all(id);
    expect(got.map((r) => r.value)).toEqual(phashChunks(BigInt(got[0]!.hash)));
  }
  return after;
}
