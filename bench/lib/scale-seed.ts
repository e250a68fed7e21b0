// `bench/scale.ts seed`: a realistic large library written in bulk through Kura's own
// startup path (openDataDir, migrations, createAppContext, UserRepo, storageKeyFor,
// newShortId, phash index helpers), so the data dir is exactly what a server would open.
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createAppContext } from "../../src/app-context";
import { hashPassword } from "../../src/auth/passwords";
import { ensureBuiltinAdmin, openDataDir } from "../../src/boot";
import { readBootstrap } from "../../src/config/bootstrap";
import { sqlTime } from "../../src/db/time";
import { phashChunks, phashToInt } from "../../src/images/phash-index";
import { storageKeyFor } from "../../src/images/storage-key";
import { newShortId } from "../../src/images/short-id";
import { rebuildFileNameIndex } from "../../src/images/repos/file-name-index";
import type { Logger } from "../../src/ops/log";
import { rebuildUsageRollups } from "../../src/ops/repos/usage";
import { makeJpeg, PHOTO_200KB } from "./jpegs";

export const SCALE_ADMIN_PASSWORD = "scale-admin-password-1";
export const SCALE_USER_PASSWORD = "scale-user-password-1";
export const SCALE_USERS = 50;
/** Blobs that get real bytes in the local channel, for the /i/ probe. */
export const REAL_BLOBS = 32;

const quiet: Logger = { info: () => {}, warn: () => {}, error: (msg, f) => console.error(msg, f ?? "") };

/** mulberry32: the same library for the same --images every time. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, "0");
const WORDS = ["holiday", "cat", "screenshot", "猫咪", "receipt", "avatar", "banner", "IMG", "DSC", "scan"];

export interface SeedResult {
  images: number;
  blobs: number;
  users: number;
  seconds: number;
}

export async function seedLibrary(dataDir: string, imageCount: number, progress: (msg: string) => void): Promise<SeedResult> {
  const started = performance.now();
  const random = rng(imageCount);
  const boot = readBootstrap({ KURA_DATA_DIR: dataDir, KURA_LISTEN: "127.0.0.1:0" });
  const { db, key } = openDataDir(boot, quiet);
  await ensureBuiltinAdmin(db, quiet);
  const app = await createAppContext(boot, db, key, quiet, () => {});
  const channelId = app.channels.list()[0]!.row.id;
  app.users.setPassword("default", await hashPassword(SCALE_ADMIN_PASSWORD), false);
  const userHash = await hashPassword(SCALE_USER_PASSWORD);
  const userIds: string[] = [];
  for (let u = 1; u <= SCALE_USERS; u++) {
    const id = `u${String(u).padStart(11, "0")}`;
    app.users.insert({
      id,
      name: `user${String(u).padStart(2, "0")}`,
      role: "user",
      password_hash: userHash,
      must_change_password: 0,
      quota_bytes: u === 1 ? 10 * 1024 ** 4 : null,
      default_ttl_hours: null,
      disabled: 0,
    });
    userIds.push(id);
  }

  // Bulk load with the per-row triggers set aside; rollups and the FTS index are rebuilt after.
  const triggers = db.query<{ name: string; sql: string }, []>("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").all();
  for (const t of triggers) db.exec(`DROP TRIGGER ${t.name}`);
  // Secondary indexes too: a row insert then touches only the table's own B-tree, and
  // CREATE INDEX afterwards builds each index from one sort instead of ~1M random inserts
  // (the seed's time was >80% in SQLite index maintenance). Implicit indexes of PRIMARY KEY
  // and UNIQUE columns (sql IS NULL) stay, so duplicates are still refused while loading.
  const indexes = db
    .query<{ name: string; sql: string }, []>(
      "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN ('blobs', 'blob_channels', 'phash_index', 'images', 'audit')",
    )
    .all();
  for (const i of indexes) db.exec(`DROP INDEX ${i.name}`);
  db.exec("PRAGMA synchronous = OFF");
  db.exec("PRAGMA cache_size = -262144");

  const blobCount = Math.max(REAL_BLOBS, Math.round(imageCount * 0.8));
  const now = Date.now();
  const span = 2 * 365 * 86_400_000;
  const real = await Promise.all(Array.from({ length: REAL_BLOBS }, (_, i) => makeJpeg({ ...PHOTO_200KB, width: 320, height: 240 }, 7000 + i)));

  const refs = new Int32Array(blobCount + 1);
  const blobOfImage = new Int32Array(imageCount);
  for (let i = 0; i < imageCount; i++) {
    const blob = i < blobCount ? i + 1 : 1 + Math.floor(random() * blobCount);
    blobOfImage[i] = blob;
    refs[blob]!++;
  }

  const insertBlob = db.query(
    `INSERT INTO blobs (id, sha256, phash, storage_key, mime, size, width, height, ref_count, created_at)
     VALUES (?, ?, ?, ?, 'image/jpeg', ?, ?, ?, ?, ?)`,
  );
  const insertReplica = db.query("INSERT INTO blob_channels (blob_id, channel_id, state, updated_at) VALUES (?, ?, 'done', ?)");
  const insertChunk = db.query("INSERT OR IGNORE INTO phash_index (chunk, value, blob_id, hash) VALUES (?, ?, ?, ?)");
  const hashes: string[] = [];
  // Each image carries its blob's size (migration 0013; its trigger is set aside with the others).
  const blobSizes = new Int32Array(blobCount + 1);
  const BATCH = 20_000;
  for (let start = 1; start <= blobCount; start += BATCH) {
    db.transaction(() => {
      for (let id = start; id < Math.min(start + BATCH, blobCount + 1); id++) {
        // ~1% near-duplicates: a recent hash with 1–4 bits flipped.
        let phash: string;
        if (hashes.length > 10 && random() < 0.01) {
          const base = hashes[hashes.length - 1 - Math.floor(random() * Math.min(hashes.length - 1, 1000))]!;
          let v = phashToInt(base);
          for (let f = 1 + Math.floor(random() * 4); f > 0; f--) v ^= 1n << BigInt(Math.floor(random() * 64));
          phash = BigInt.asUintN(64, v).toString(16).padStart(16, "0");
        } else phash = hex8(random() * 2 ** 32) + hex8(random() * 2 ** 32);
        hashes.push(phash);
        const realBytes = id <= REAL_BLOBS ? real[id - 1]! : undefined;
        // Delivery verifies the bytes it reads against the blob's sha256 (a mismatch answers 503),
        // so a blob with real bytes carries their true hash; the others only need a unique one.
        const fakeSha = hex8(id) + hex8(random() * 2 ** 32) + "0".repeat(48);
        const sha = realBytes ? createHash("sha256").update(realBytes).digest("hex") : fakeSha;
        const key = storageKeyFor(sha, "jpg");
        const size = realBytes?.length ?? 30_000 + Math.floor(random() * 400_000);
        const createdAt = sqlTime(now - span + (span * (id - 1)) / blobCount);
        blobSizes[id] = size;
        insertBlob.run(id, sha, phash, key, size, realBytes ? 320 : 1024, realBytes ? 240 : 768, refs[id]!, createdAt);
        insertReplica.run(id, channelId, createdAt);
        const hash = phashToInt(phash);
        for (const [chunk, value] of phashChunks(hash).entries()) insertChunk.run(chunk, value, id, hash);
        if (realBytes) {
          const path = join(app.paths.storage, key);
          mkdirSync(dirname(path), { recursive: true });
          writeFileSync(path, realBytes);
        }
      }
    })();
    progress(`blobs ${Math.min(start + BATCH - 1, blobCount)}/${blobCount}`);
  }
  hashes.length = 0;
  db.query("INSERT INTO meta (key, value) VALUES ('dedup_scan_watermark', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(
    JSON.stringify({ after: blobCount, waiting: [] }),
  );

  const insertImage = db.query(
    `INSERT INTO images (id, blob_id, user_id, file_name, expire_at, ttl_seconds, last_public_access_at, access_count, created_at, blob_size)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const ids = new Set<string>();
  for (let start = 0; start < imageCount; start += BATCH) {
    db.transaction(() => {
      for (let i = start; i < Math.min(start + BATCH, imageCount); i++) {
        let id = newShortId();
        while (ids.has(id)) id = newShortId();
        ids.add(id);
        // A few heavy users own most images.
        const user = userIds[Math.floor(random() ** 2 * SCALE_USERS)]!;
        const createdMs = now - span + (span * i) / imageCount;
        const expiring = random() < 0.05;
        const accesses = Math.floor(random() ** 4 * 2000);
        const lastAccess = accesses ? sqlTime(createdMs + random() * (now - createdMs)) : null;
        const name = `${WORDS[i % WORDS.length]}_${i}.jpg`;
        insertImage.run(
          id,
          blobOfImage[i]!,
          user,
          name,
          expiring ? sqlTime(now + random() * 30 * 86_400_000) : null,
          expiring ? 30 * 86_400 : null,
          lastAccess,
          accesses,
          sqlTime(createdMs),
          blobSizes[blobOfImage[i]!]!,
        );
      }
    })();
    progress(`images ${Math.min(start + BATCH, imageCount)}/${imageCount}`);
  }
  ids.clear();

  const insertAudit = db.query("INSERT INTO audit (actor, actor_name, action, target, detail, created_at) VALUES (?, ?, 'image.delete', ?, '', ?)");
  db.transaction(() => {
    for (let a = 0; a < Math.round(imageCount / 10); a++)
      insertAudit.run(userIds[a % SCALE_USERS]!, "user", `img${a}`, sqlTime(now - random() * 60 * 86_400_000));
  })();

  progress("indexes, rollups, search index and triggers");
  for (const i of indexes) db.exec(i.sql);
  for (const t of triggers) db.exec(t.sql);
  rebuildUsageRollups(db);
  rebuildFileNameIndex(db);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  return { images: imageCount, blobs: blobCount, users: SCALE_USERS + 1, seconds: (performance.now() - started) / 1000 };
}
