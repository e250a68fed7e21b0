import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";

/**
 * Migration 0012: pending similar-image pairs beyond the 20 nearest of their later blob are
 * dropped (the cap the scan now applies); decided pairs and other blobs' pairs stay.
 */
test("pending pairs beyond each blob's 20 nearest are dropped; decided ones stay", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig13-"));
  try {
    const db = openDatabase(join(dir, "kura.db"));
    const index = MIGRATIONS.findIndex((m) => m.name === "0012_dedup_audit_scale.sql");
    migrate(db, MIGRATIONS.slice(0, index));
    const blob = db.query(
      "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, 'k', 'image/jpeg', 1, 1, 1, 1, '2025-01-01')",
    );
    for (let i = 1; i <= 40; i++) blob.run(`s${i}`);
    const pair = db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, state, created_at) VALUES (?, ?, ?, ?, '2025-01-01')");
    // Blob 40 with each of 1-39: distance 6 - (a % 4), two of them decided; blob 10 with 1-9 (under the cap).
    for (let a = 1; a < 40; a++) pair.run(a, 40, 6 - (a % 4), a === 3 || a === 37 ? "dismissed" : "pending");
    for (let a = 1; a < 10; a++) pair.run(a, 10, 2, "pending");
    migrate(db);
    const pending40 = db
      .query<{ a: number; d: number }, []>("SELECT blob_a AS a, distance AS d FROM dedup_candidates WHERE blob_b = 40 AND state = 'pending'")
      .all()
      .map((r) => `${r.a}:${r.d}`)
      .sort();
    const expected = Array.from({ length: 39 }, (_, i) => i + 1)
      .filter((a) => a !== 3 && a !== 37)
      .map((a) => ({ a, d: 6 - (a % 4) }))
      .sort((x, y) => x.d - y.d || x.a - y.a)
      .slice(0, 20)
      .map((r) => `${r.a}:${r.d}`)
      .sort();
    expect(pending40).toEqual(expected);
    expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM dedup_candidates WHERE state = 'dismissed'").get()!.n).toBe(2);
    expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM dedup_candidates WHERE blob_b = 10").get()!.n).toBe(9);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
