/**
 * A scan pairs each blob with its 20 nearest only, so in a cluster of more copies than that some
 * copies are paired only with blobs that merges later remove. Merging pair after pair must still
 * reach every copy: the kept blob is paired anew with the live copies it has no pair with (by the
 * index within distance 6, by the next round's worker above it). Without that, a 40-copy cluster
 * merged keeping the newer blob each time ended with copies no pair listed, never merged.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dismiss, merge, scanRound } from "../../src/images/dedup";
import { SYSTEM_ACTOR } from "../../src/ops/audit";
import { openContext } from "../helpers/context";
import { hex64, rng } from "../helpers/phashes";

const COPIES = 40;

for (const distance of [6, 8]) {
  test(`distance ${distance}: merging a ${COPIES}-copy cluster pair by pair reaches every copy; a dismissed pair stays dismissed`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-dedup-refill-"));
    const ctx = await openContext(dir);
    try {
      const { app } = ctx;
      app.settings.update({ dedup_phash_max_distance: distance });
      const random = rng(distance);
      const base = (BigInt(Math.floor(random() * 2 ** 32)) << 32n) | BigInt(Math.floor(random() * 2 ** 32));
      const insert = app.db.query(
        `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
         VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, 0, '2026-01-01 00:00:00')`,
      );
      const ids: number[] = [];
      app.db.transaction(() => {
        for (let n = 0; n < COPIES; n++) {
          // Copies one or two bits from the base: every pair within distance 4.
          let h = base ^ (1n << BigInt(n % 64));
          if (n % 3 === 0) h ^= 1n << BigInt((n * 7 + 1) % 64);
          ids.push(Number(insert.run(`sha-${n}`, hex64(h)).lastInsertRowid));
        }
      })();
      await scanRound(app);
      const pending = app.db.query<{ id: number; blob_a: number; blob_b: number }, []>(
        "SELECT id, blob_a, blob_b FROM dedup_candidates WHERE state = 'pending' ORDER BY distance, id LIMIT 1",
      );
      const pairCount = app.db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM dedup_candidates");
      // Capped: not every one of the 780 pairs.
      expect(pairCount.get()!.n).toBeLessThan((COPIES * (COPIES - 1)) / 2);

      // The admin says the first pair is not a duplicate: that pair is never suggested again.
      const first = pending.get()!;
      dismiss(app, first.id, SYSTEM_ACTOR);
      const dismissed = [first.blob_a, first.blob_b];

      let merges = 0;
      for (let rounds = 0; rounds < 10; rounds++) {
        for (let pair = pending.get(); pair; pair = pending.get()) {
          merge(app, pair.id, Math.max(pair.blob_a, pair.blob_b), SYSTEM_ACTOR);
          merges++;
        }
        // Above distance 6 the kept blob is paired anew by the next round (in the worker).
        if ((await scanRound(app)).found === 0) break;
      }
      const live = app.db
        .query<{ id: number }, []>("SELECT id FROM blobs WHERE pending_delete = 0 ORDER BY id")
        .all()
        .map((r) => r.id);
      // Every copy merged into one blob, except where the dismissed pair kept two apart: the two blobs
      // of that pair may both survive (the admin said they differ), nothing else may.
      expect(live.length).toBeLessThanOrEqual(2);
      if (live.length === 2) {
        const pair = app.db
          .query<{ state: string }, [number, number]>("SELECT state FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?")
          .get(live[0]!, live[1]!);
        expect(pair?.state).toBe("dismissed");
      }
      expect(merges).toBe(COPIES - live.length);
      // The dismissed pair was never pending again.
      const again = app.db
        .query<{ state: string }, [number, number]>("SELECT state FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?")
        .get(Math.min(...dismissed), Math.max(...dismissed));
      expect(again?.state).toBe("dismissed");
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
