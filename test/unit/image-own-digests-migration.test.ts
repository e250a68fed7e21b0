import type { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";
import { OWN_MD5, OWN_SHA1, ownDigests, recordUploadDigests, recordUploadMd5 } from "../../src/images/repos/blob-md5";
import { moveImagesToBlob } from "../../src/images/repos/dedup";
import { insertImageRow } from "../../src/images/repos/references";
import { SRC, sourceFiles } from "../contract/import-graph";

/**
 * Migration 0016 (audit LOW-2): each image records which of its blob's digests its own upload computed
 * (`images.own_digests`), and the Lsky list shows only those, never ones another reference's upload
 * stored with the shared blob.
 */
function withDb(fn: (db: Database) => void, upTo?: string) {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig16-"));
  try {
    const db = openDatabase(join(dir, "kura.db"));
    migrate(
      db,
      upTo
        ? MIGRATIONS.slice(
            0,
            MIGRATIONS.findIndex((m) => m.name === upTo),
          )
        : MIGRATIONS,
    );
    db.exec("INSERT INTO users (id, name, role, password_hash, created_at) VALUES ('u', 'u', 'user', 'x', '2025-01-01 00:00:00')");
    const blob = db.query(
      "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES (?, 'k', 'image/png', 1, 1, 1, 1, '2025-01-01', ?)",
    );
    blob.run("a", "");
    blob.run("b", "m-b");
    fn(db);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const own = (db: Database) => db.query<{ id: string; own_digests: number }, []>("SELECT id, own_digests FROM images ORDER BY id").all();
const digests = (db: Database) => db.query<{ md5: string; sha1: string }, []>("SELECT md5, sha1 FROM blobs ORDER BY id").all();

const row = (id: string, blobId: number, ownDigests: number) => ({
  id,
  blobId,
  userId: "u",
  tokenId: null,
  fileName: `${id}.png`,
  objectKey: null,
  expireAt: null,
  ttlSeconds: null,
  createdAt: "2025-01-02 00:00:00",
  ownDigests,
});

test("images from before the migration keep the digests the list showed them; new rows carry what they name", () =>
  withDb((db) => {
    db.exec("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES ('old', 2, 'u', 'old.png', '2025-01-01')");
    migrate(db);
    expect(own(db)).toEqual([{ id: "old", own_digests: OWN_MD5 | OWN_SHA1 }]);
    insertImageRow(db, row("new", 2, 0));
    expect(own(db)).toEqual([
      { id: "new", own_digests: 0 },
      { id: "old", own_digests: 3 },
    ]);
  }, "0016_image_own_digests.sql"));

test("an upload's digests go to the blob once and mark only its own image; a merge clears the moved images' marks", () =>
  withDb((db) => {
    for (const [id, blobId] of [
      ["console", 1],
      ["lsky", 1],
      ["s3", 2],
    ] as const)
      insertImageRow(db, row(id, blobId, 0));
    recordUploadDigests(db, "lsky", 1, { md5: "m-a", sha1: "s-a" });
    // An S3 upload's MD5 does not replace the one the blob has; the image knows the MD5 only.
    recordUploadMd5(db, "s3", 2, "other");
    expect(digests(db)).toEqual([
      { md5: "m-a", sha1: "s-a" },
      { md5: "m-b", sha1: "" },
    ]);
    expect(own(db)).toEqual([
      { id: "console", own_digests: 0 },
      { id: "lsky", own_digests: 3 },
      { id: "s3", own_digests: 1 },
    ]);
    // The list's view of one blob's digests through each image's mark.
    const stored = { md5: "m-a", sha1: "s-a" };
    expect([0, 1, 2, 3].map((mark) => ownDigests(mark, stored))).toEqual([{ md5: "", sha1: "" }, { md5: "m-a", sha1: "" }, { md5: "", sha1: "s-a" }, stored]);
    expect(ownDigests(3, undefined)).toEqual({ md5: "", sha1: "" });
    // Merged into a near duplicate: their uploads computed nothing of the kept blob's bytes.
    expect(moveImagesToBlob(db, 1, 2).sort()).toEqual(["console", "lsky"]);
    expect(own(db)).toEqual([
      { id: "console", own_digests: 0 },
      { id: "lsky", own_digests: 0 },
      { id: "s3", own_digests: 1 },
    ]);
  }));

/** A new way of creating image rows must decide what its upload knows: the column's default is for old rows only. */
test("every INSERT INTO images in src names own_digests", () => {
  const inserts = sourceFiles().flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/INSERT\s+(?:OR\s+\w+\s+)?INTO\s+images\s*\(([^)]*)\)/g)].map((m) => ({
      file: relative(SRC, file),
      names: m[1]!.includes("own_digests"),
    })),
  );
  expect(inserts.length).toBeGreaterThan(0);
  expect(inserts.filter((i) => !i.names)).toEqual([]);
});
