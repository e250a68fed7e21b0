/**
 * Blobs have no storage_key index (migration 0010): a key made by storageKeyFor carries the
 * blob's sha256, and blobIdByStorageKey finds the blob through the sha256 index. Upload undo
 * and crash recovery rely on it to tell an owned object from an orphan, so a wrong answer
 * either deletes a stored image or keeps an orphan.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { migrate, openDatabase } from "../../src/db/open";
import { BLOB_BY_HASHED_KEY_SQL, blobIdByStorageKey, insertBlobRow } from "../../src/images/repos/references";
import { sha256OfStorageKey, STORAGE_KEY_PATTERN, storageKeyFor } from "../../src/images/storage-key";
import { fuzzParams } from "../fuzz/fuzz-support";

const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/);

test("every key storageKeyFor makes matches the pattern and gives back its sha256", () => {
  fc.assert(
    fc.property(hex64, fc.constantFrom("jpg", "png", "webp", "avif", "gif"), (sha, ext) => {
      const key = storageKeyFor(sha, ext);
      expect(STORAGE_KEY_PATTERN.test(key)).toBe(true);
      expect(sha256OfStorageKey(key)).toBe(sha);
    }),
    fuzzParams(5),
  );
  const sha = "a".repeat(64);
  const others = [
    "img/ab/cd/short-1234abcd.jpg",
    `_kura/${sha}-1234abcd.jpg`,
    `img/ab/cd/${sha}.jpg`,
    `x/img/ab/cd/${sha}-1234abcd.jpg`, // not at the start
    `img/ab/cd/${sha}-1234abcd.jpg.tmp`, // a temp file beside an object is not a storage key
    "",
  ];
  for (const other of others) {
    expect(sha256OfStorageKey(other)).toBeUndefined();
  }
});

test("blobIdByStorageKey: exact key only, through the sha256 index; other keys still found", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-key-"));
  const db = openDatabase(join(dir, "k.db"));
  try {
    migrate(db);
    const blob = (sha256: string, storageKey: string) =>
      insertBlobRow(db, { sha256, storageKey, mime: "image/png", size: 1, width: 1, height: 1, createdAt: "2026-11-27 10:00:00" });
    const sha = "ab".repeat(32);
    const key = storageKeyFor(sha, "png");
    const id = blob(sha, key);
    blob("cd".repeat(32), storageKeyFor("cd".repeat(32), "png"));
    expect(blobIdByStorageKey(db, key)).toBe(id);
    // The same blob under another generation (an object a physical delete is still removing) is not it.
    expect(blobIdByStorageKey(db, storageKeyFor(sha, "png"))).toBeUndefined();
    expect(blobIdByStorageKey(db, storageKeyFor("ef".repeat(32), "png"))).toBeUndefined();
    // The hash is taken from the key: a row whose key names another hash is not found by it
    // (storageKeyFor never makes one; this pins that the lookup goes through the sha256 index).
    const mismatch = storageKeyFor("0f".repeat(32), "png");
    blob("34".repeat(32), mismatch);
    expect(blobIdByStorageKey(db, mismatch)).toBeUndefined();
    // A key in no known format (none are written today) is still found: recovery must not delete it.
    const odd = blob("12".repeat(32), "legacy/photo.png");
    expect(blobIdByStorageKey(db, "legacy/photo.png")).toBe(odd);

    const plan = db
      .query<{ detail: string }, [string, string]>(`EXPLAIN QUERY PLAN ${BLOB_BY_HASHED_KEY_SQL}`)
      .all(sha, key)
      .map((r) => r.detail);
    expect(plan).toHaveLength(1);
    expect(plan[0]).toMatch(/^SEARCH blobs USING INDEX \S+ \(sha256=\?\)$/);
    const indexes = db
      .query<{ name: string }, []>("SELECT name FROM pragma_index_list('blobs')")
      .all()
      .map((r) => r.name);
    expect(indexes).not.toContain("blobs_storage_key");
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
