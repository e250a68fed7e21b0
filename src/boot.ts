import { constants, Database } from "bun:sqlite";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { hashPassword } from "./auth/passwords";
import { randomReadable } from "./auth/secrets";
import type { Bootstrap } from "./config/bootstrap";
import { loadMasterKey, type MasterKey, writeNewMasterKeyFile } from "./config/master-key";
import { hasMetaTable, readMeta, writeMeta } from "./db/meta";
import { migrate, openDatabase } from "./db/open";
import { snapshotBeforeMigration } from "./datadir/pre-migration";
import { rebuildFileNameIndex } from "./images/repos/file-name-index";
import { endRestoredSessions, resetChannelBindings, stagedPath, swapInStagedSnapshot } from "./ops/backups";
import type { Logger } from "./ops/log";
import { BUILTIN_ADMIN_ID, BUILTIN_ADMIN_NAME, UserRepo } from "./users/repo";

/** A startup failure with a Chinese reason, logged as `err` before a non-zero exit. */
export class StartupError extends Error {}

export function databasePath(dataDir: string): string {
  return join(dataDir, "kura.db");
}

/**
 * Maintenance commands (reset-password, backup, check) work on the service's existing data
 * directory and never create one: run from the wrong directory they would otherwise make a
 * fresh database and master key whose passwords work nowhere.
 */
export function requireExistingDatabase(boot: Bootstrap): void {
  if (existsSync(databasePath(boot.dataDir)) || existsSync(stagedPath(boot.dataDir))) return;
  throw new StartupError(
    `数据目录 ${boot.dataDir} 中没有 Kura 数据库 kura.db；请把 KURA_DATA_DIR 设为服务使用的数据目录（例如 KURA_DATA_DIR=/var/lib/kura），此命令不会新建数据目录`,
  );
}

/** Whether the database at `path` has a WAL with frames in it (more than its 32-byte header). */
function hasWalFrames(path: string): boolean {
  try {
    return statSync(`${path}-wal`).size > 32;
  } catch {
    return false;
  }
}

/** The meta key under which the database records the fingerprint of its master key. */
const FINGERPRINT_KEY = "master_key_fingerprint";

/** Reads the stored master-key fingerprint without writing anything; undefined for a new database. */
export function storedFingerprint(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  // Frames left in the WAL mean the last process never ran its final checkpoint (a crash, a
  // kill -9), perhaps in the middle of one: the file alone may then be half copied from the WAL,
  // so it is read through the WAL, with `readonly_shm` so that SQLite indexes the WAL in memory
  // instead of recovering the -shm file the crash left (without one, only the file can be read).
  // Otherwise immutable: a plain read-only open of a WAL database would still create -wal/-shm
  // files. Either way no file is touched.
  const mode = hasWalFrames(path) && existsSync(`${path}-shm`) ? "mode=ro&readonly_shm=1" : "immutable=1";
  const db = new Database(`file:${encodeURI(path)}?${mode}`, constants.SQLITE_OPEN_READONLY | constants.SQLITE_OPEN_URI);
  try {
    if (!hasMetaTable(db)) return undefined;
    return readMeta(db, FINGERPRINT_KEY);
  } finally {
    db.close();
  }
}

/**
 * Opens the data directory: checks the master key against the database BEFORE
 * writing anything, generates a key for a new database, runs migrations.
 */
/**
 * For one-shot commands: opens the existing data directory (never creating one), or logs why
 * it cannot be used and returns the exit code.
 */
export function openExistingDataDir(boot: Bootstrap, log: Logger): { db: Database; key: MasterKey } | number {
  try {
    requireExistingDatabase(boot);
    return openDataDir(boot, log);
  } catch (err) {
    if (err instanceof StartupError) {
      log.error("无法打开数据目录", { err: err.message });
      return 1;
    }
    throw err;
  }
}

export function openDataDir(boot: Bootstrap, log: Logger): { db: Database; key: MasterKey } {
  mkdirSync(boot.dataDir, { recursive: true, mode: 0o700 });
  const dbPath = databasePath(boot.dataDir);
  // A restore staged by the previous process becomes the database: the key is checked against
  // the staged file first, so a wrong key still refuses before anything is moved.
  const staged = existsSync(stagedPath(boot.dataDir)) ? stagedPath(boot.dataDir) : undefined;
  const fingerprint = storedFingerprint(staged ?? dbPath);
  let key: MasterKey | undefined;
  try {
    key = loadMasterKey(boot.dataDir, boot.masterKeyEnv);
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
  if (fingerprint !== undefined) {
    if (!key) throw new StartupError("主密钥缺失：未设置 KURA_MASTER_KEY，数据目录中也没有 master.key");
    if (key.fingerprint !== fingerprint) throw new StartupError("主密钥与数据库记录的指纹不匹配");
  } else if (!key) {
    key = writeNewMasterKeyFile(boot.dataDir);
    log.info("已为新数据库生成主密钥文件，请妥善备份", { path: join(boot.dataDir, "master.key") });
  }
  const swapped = staged !== undefined && swapInStagedSnapshot(boot.dataDir, dbPath, log);
  const db = openDatabase(dbPath);
  try {
    // A newer schema refuses inside migrate() before anything is copied or changed.
    snapshotBeforeMigration(db, dbPath, log);
    migrate(db);
  } catch (err) {
    db.close();
    throw new StartupError((err as Error).message);
  }
  // Authoritative re-check on the real connection (it also sees a WAL left by a crash).
  const recorded = readMeta(db, FINGERPRINT_KEY);
  if (recorded !== undefined && recorded !== key.fingerprint) {
    db.close();
    throw new StartupError("主密钥与数据库记录的指纹不匹配");
  }
  if (recorded === undefined) {
    writeMeta(db, FINGERPRINT_KEY, key.fingerprint);
    // Into the main file at once: the read-only pre-check of a later start reads only that file.
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  if (swapped) {
    resetChannelBindings(db, log);
    endRestoredSessions(db, log);
    // The file-name index is keyed by images' rowid, which a VACUUM INTO snapshot may renumber.
    rebuildFileNameIndex(db);
  }
  return { db, key };
}

/** Gives a user a fresh random factory default password; the only password ever logged. */
export async function seedDefaultPassword(users: UserRepo, userId: string, log: Logger): Promise<void> {
  const password = randomReadable(16);
  users.setPassword(userId, await hashPassword(password), true);
  const user = users.byId(userId)!;
  log.info("已设置出厂默认密码，请登录后立即修改", { user: user.name, password });
}

export async function ensureBuiltinAdmin(db: Database, log: Logger): Promise<void> {
  const users = new UserRepo(db);
  if (users.byId(BUILTIN_ADMIN_ID)) return;
  users.insert({
    id: BUILTIN_ADMIN_ID,
    name: BUILTIN_ADMIN_NAME,
    role: "admin",
    password_hash: "!",
    must_change_password: 1,
    quota_bytes: null,
    default_ttl_hours: null,
    disabled: 0,
  });
  await seedDefaultPassword(users, BUILTIN_ADMIN_ID, log);
}
