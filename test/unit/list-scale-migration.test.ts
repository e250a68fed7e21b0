import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";

/**
 * Migration 0013: every image carries its blob's size (the Lsky list's size orders walk
 * images_user_size), filled in for existing rows and kept in step by its triggers.
 */
test("images.blob_size is backfilled and follows inserts, merges and size corrections", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig14-"));
  try {
    const db = openDatabase(join(dir, "kura.db"));
    const index = MIGRATIONS.findIndex((m) => m.name === "0013_list_scale.sql");
    migrate(db, MIGRATIONS.slice(0, index));
    db.exec("INSERT INTO users (id, name, role, password_hash, created_at) VALUES ('u', 'u', 'user', 'x', '2025-01-01 00:00:00')");
    const blob = db.query(
      "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, 'k', 'image/jpeg', ?, 1, 1, 1, '2025-01-01')",
    );
    blob.run("a", 100);
    blob.run("b", 200);
    const image = db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, 'u', 'x.jpg', '2025-01-01')");
    image.run("old", 1);
    migrate(db);
    const sizes = () => db.query<{ id: string; s: number }, []>("SELECT id, blob_size AS s FROM images ORDER BY id").all();
    expect(sizes()).toEqual([{ id: "old", s: 100 }]);
    image.run("new", 2);
    expect(sizes()).toEqual([
      { id: "new", s: 200 },
      { id: "old", s: 100 },
    ]);
    db.exec("UPDATE images SET blob_id = 2 WHERE id = 'old'");
    db.exec("UPDATE blobs SET size = 250 WHERE id = 2");
    expect(sizes()).toEqual([
      { id: "new", s: 250 },
      { id: "old", s: 250 },
    ]);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
