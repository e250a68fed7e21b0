import { constants, Database } from "bun:sqlite";
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import { hashPassword } from "./auth/passwords";
import { randomReadable } from "./auth/secrets";
import type { Bootstrap } from "./config/bootstrap";
import { loadMasterKey, type MasterKey, writeNewMasterKeyFile } from "./config/master-key";
import { isSqliteDamage } from "./db/damage";
import { hasMetaTable, readMeta, writeMeta } from "./db/meta";
import { MIGRATIONS } from "./db/migrations";
import { migrate, openDatabase, schemaVersion } from "./db/open";
import { finishUpgrade, snapshotBeforeMigration } from "./datadir/pre-migration";
import { rebuildFileNameIndex } from "./images/repos/file-name-index";
import { endRestoredSessions, fileStamp, removeStagingLeftover, resetChannelBindings, stagedPath, swapInStagedSnapshot } from "./ops/backups";
import { FINGERPRINT_KEY, snapshotProblem } from "./ops/snapshot-check";
import type { Logger } from "./ops/log";
import { BUILTIN_ADMIN_ID, BUILTIN_ADMIN_NAME, UserRepo } from "./users/repo";
import { fsProblem } from "./shared/fs-errors";
import { hasChinese } from "./shared/text";

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

/**
 * Opens an existing database without writing anything (no -wal/-shm created, no recovery).
 */
export function openReadOnly(path: string): Database {
  // Frames left in the WAL mean the last process never ran its final checkpoint (a crash, a
  // kill -9), perhaps in the middle of one: the file alone may then be half copied from the WAL,
  // so it is read through the WAL, with `readonly_shm` so that SQLite indexes the WAL in memory
  // instead of recovering the -shm file the crash left (without one, only the file can be read).
  // Otherwise immutable: a plain read-only open of a WAL database would still create -wal/-shm
  // files. Either way no file is touched.
  const mode = hasWalFrames(path) && existsSync(`${path}-shm`) ? "mode=ro&readonly_shm=1" : "immutable=1";
  return new Database(`file:${encodeURI(path)}?${mode}`, constants.SQLITE_OPEN_READONLY | constants.SQLITE_OPEN_URI);
}

/** Reads the stored master-key fingerprint without writing anything; undefined for a new database. */
export function storedFingerprint(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  const db = openReadOnly(path);
  try {
    if (!hasMetaTable(db)) return undefined;
    return readMeta(db, FINGERPRINT_KEY);
  } finally {
    db.close();
  }
}

/**
 * For one-shot commands: opens the existing data directory (never creating one), or logs why
 * it cannot be used and returns the exit code.
 */
export function openExistingDataDir(boot: Bootstrap, log: Logger, opts: OpenOptions = {}): { db: Database; key: MasterKey } | number {
  try {
    requireExistingDatabase(boot);
    const opened = openDataDir(boot, log, opts);
    // A command's commits are synced before it reports them done: beside a running service its
    // WAL is not checkpointed at close, and nothing else would sync it (the service syncs only
    // what its own requests wrote, db/durability.ts). Commands are short; the fsyncs cost nothing.
    opened.db.exec("PRAGMA synchronous = FULL");
    return opened;
  } catch (err) {
    if (err instanceof MigrationPendingError) {
      if (opts.rethrowPending) throw err;
      log.error(err.message, { found: err.found, latest: err.latest });
      return 1;
    }
    if (err instanceof StartupError) {
      log.error("无法打开数据目录", { err: err.message });
      return 1;
    }
    throw err;
  }
}

export interface OpenOptions {
  /**
   * This process holds the data directory's lock (kura.lock): only then may it swap in a staged
   * restore or remove a staging leftover. A command run beside a running service (false) opens the
   * live database as it is and leaves the staged file for the service's next start. Default true.
   */
  ownsDataDir?: boolean;
  /**
   * Whether an older schema is migrated (the service's start). False (one-shot commands): an older
   * schema is refused with MigrationPendingError before anything is swapped, copied or changed, so
   * the old binary, perhaps still the installed service, keeps working on it. Default true.
   */
  migrate?: boolean;
  /** openExistingDataDir: a MigrationPendingError is thrown to the caller instead of logged. */
  rethrowPending?: boolean;
}

/** The database (`path`) has an older schema and this command does not migrate. */
export class MigrationPendingError extends StartupError {
  constructor(
    readonly path: string,
    readonly found: number,
    readonly latest: number,
  ) {
    super(
      `数据库结构版本 ${found} 低于本程序的 ${latest}：此命令不迁移数据库。请先用新版本启动服务（启动时自动迁移，并先保存迁移前副本 kura.db.before-migration-v${found}-<时间>），再运行此命令；或使用与数据库同一版本的 kura`,
    );
  }
}

/** The schema version of an existing file, read without writing anything. */
export function storedSchemaVersion(path: string): number {
  const db = openReadOnly(path);
  try {
    return schemaVersion(db);
  } finally {
    db.close();
  }
}

/**
 * Opens the data directory: checks the master key against the database BEFORE
 * writing anything, generates a key for a new database, runs migrations.
 */
export function openDataDir(boot: Bootstrap, log: Logger, opts: OpenOptions = {}): { db: Database; key: MasterKey } {
  const owns = opts.ownsDataDir ?? true;
  mkdirSync(boot.dataDir, { recursive: true, mode: 0o700 });
  const dbPath = databasePath(boot.dataDir);
  let key: MasterKey | undefined;
  try {
    key = loadMasterKey(boot.dataDir, boot.masterKeyEnv);
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
  // A restore staged by the previous process becomes the database, once the whole file proved
  // usable with this key; nothing is moved before that.
  let staged: string | undefined;
  if (owns) {
    removeStagingLeftover(boot.dataDir);
    staged = usableStagedSnapshot(boot.dataDir, dbPath, key, log);
  } else if (existsSync(stagedPath(boot.dataDir))) {
    // The running service owns the directory: renaming its open database would split it in two.
    log.info("Kura 服务正在运行：暂存的快照不由此命令换入，留待服务下次启动时换入（systemctl restart kura）", { staged: stagedPath(boot.dataDir) });
  }
  refuseLostDatabase(boot.dataDir, dbPath, staged);
  const fingerprint = readFingerprint(staged ?? dbPath);
  if (opts.migrate === false) refusePendingMigration(staged ?? dbPath);
  if (fingerprint !== undefined) {
    if (!key) throw new StartupError("主密钥缺失：未设置 KURA_MASTER_KEY，数据目录中也没有 master.key");
    if (key.fingerprint !== fingerprint) throw new StartupError("主密钥与数据库记录的指纹不匹配");
  } else if (!key) {
    key = writeNewMasterKeyFile(boot.dataDir);
    log.info("已为新数据库生成主密钥文件，请妥善备份", { path: join(boot.dataDir, "master.key") });
  }
  const swapped = staged !== undefined && swapInStagedSnapshot(boot.dataDir, dbPath, log);
  let db: Database;
  try {
    db = openDatabase(dbPath);
  } catch (err) {
    throw new StartupError(isSqliteDamage(err) ? damagedDatabase(dbPath, err) : `无法打开数据库 ${dbPath}：${sqliteReason(err)}`);
  }
  try {
    // A newer schema refuses inside migrate() before anything is copied or changed.
    announceUpgrade(db, dbPath, log);
    try {
      snapshotBeforeMigration(db, dbPath, log);
    } catch (err) {
      // SQLite's and the file system's own words (a disk that filled during the copy) in Chinese.
      const m = (err as Error).message ?? String(err);
      throw new StartupError(hasChinese(m) ? m : `升级前保存数据库副本失败：${fsProblem(err) ?? sqliteReason(err)}；数据库未改动`);
    }
    // An upgrade says each step with its time (a long one is visible); a new database, one line
    // (it logged 17 steps nobody had asked for on a first start).
    const created = schemaVersion(db) === 0;
    const started = performance.now();
    migrate(db, MIGRATIONS, created ? undefined : (m, ms) => log.info("数据库结构迁移完成", { step: m.version, name: m.name, ms: Math.round(ms) }));
    if (created) log.info("已创建数据库", { version: schemaVersion(db), ms: Math.round(performance.now() - started) });
    finishUpgrade(db);
  } catch (err) {
    db.close();
    // Damage SQLite meets while migrating (or reading the schema) says what to do, as a damaged header does.
    throw new StartupError(isSqliteDamage(err) ? damagedDatabase(dbPath, err) : (err as Error).message);
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

/**
 * Before an upgrade's copy and migrations: they run before Kura listens and take seconds to minutes
 * on a large library, so the log says what is happening instead of going quiet (an operator might
 * take the silence for a hang and kill the start).
 */
function announceUpgrade(db: Database, dbPath: string, log: Logger) {
  const current = schemaVersion(db);
  const latest = MIGRATIONS.at(-1)?.version ?? 0;
  if (current === 0 || current >= latest) return;
  const mib = Math.round(statSync(dbPath).size / 1048576);
  log.info("数据库需要升级：先保存升级前的副本，再迁移结构；大的数据库可能需要几分钟，完成前服务不接受请求", { from: current, to: latest, db_mib: mib });
}

/** For a command that does not migrate: an older schema in `path` is refused before anything changes. */
function refusePendingMigration(path: string): void {
  if (!existsSync(path) || statSync(path).size === 0) return;
  let found: number;
  try {
    found = storedSchemaVersion(path);
  } catch {
    return; // a damaged file fails below with its own message
  }
  const latest = MIGRATIONS.at(-1)?.version ?? 0;
  if (found > 0 && found < latest) throw new MigrationPendingError(path, found, latest);
}

/**
 * The staged snapshot to swap in, or undefined. One that cannot become the database (corrupt,
 * another master key, a newer schema, not Kura's) is set aside as `restore.rejected-<time>.db`
 * and the live database stays in use, with an error in the log; without a live database to fall
 * back on (a new machine being recovered) the start fails instead of making an empty one.
 */
function usableStagedSnapshot(dataDir: string, dbPath: string, key: MasterKey | undefined, log: Logger): string | undefined {
  const staged = stagedPath(dataDir);
  if (!existsSync(staged)) return undefined;
  const problem = snapshotProblem(staged, { keyFingerprint: key?.fingerprint, integrity: true });
  if (problem === null) return staged;
  if (!hasDatabase(dbPath)) throw new StartupError(`暂存的快照 ${staged} 无法换入：${problem}`);
  const rejected = join(dataDir, `restore.rejected-${fileStamp()}.db`);
  renameSync(staged, rejected);
  log.error("暂存的快照无法换入，继续使用当前数据库", { reason: problem, rejected });
  return undefined;
}

/**
 * An empty kura.db beside channel objects is a lost database (a failed copy, a full disk), not a
 * first start: starting would seed a new admin, and the next backups would replace the good
 * snapshots on the channels with empty ones.
 */
function refuseLostDatabase(dataDir: string, dbPath: string, staged: string | undefined): void {
  if (staged !== undefined || !existsSync(dbPath) || statSync(dbPath).size > 0) return;
  const storage = join(dataDir, "storage");
  if (!statSync(storage, { throwIfNoEntry: false })?.isDirectory() || readdirSync(storage).length === 0) return;
  throw new StartupError(
    `数据库文件 ${dbPath} 是空文件，但数据目录中已有存储的图片：数据库可能已丢失。请用 kura restore 从快照恢复；确认要重新初始化时先删除 kura.db`,
  );
}

const hasDatabase = (dbPath: string) => existsSync(dbPath) && statSync(dbPath).size > 0;

/** storedFingerprint, with a damaged file as a startup failure that says what to do. */
function readFingerprint(path: string): string | undefined {
  try {
    return storedFingerprint(path);
  } catch (err) {
    // SQLite says only "disk I/O error" of a directory in the database's place.
    if (statSync(path, { throwIfNoEntry: false })?.isDirectory())
      throw new StartupError(`数据库文件 ${path} 是一个目录，不是文件：请移走它，或把 KURA_DATA_DIR 指向服务的数据目录`);
    throw new StartupError(damagedDatabase(path, err));
  }
}

const damagedDatabase = (path: string, err: unknown) => `数据库文件 ${path} 已损坏或不是 SQLite 数据库（${sqliteReason(err)}）：请用 kura restore 从快照恢复`;

/** SQLite's reason in Chinese for the common cases, else its own words after a Chinese label (no stack). */
function sqliteReason(err: unknown): string {
  const message = (err as Error).message ?? String(err);
  if (/readonly|read-only|permission|EACCES/i.test(message)) return "没有写入权限，请检查数据目录及其中文件的属主和权限";
  if (/malformed|not a database|corrupt/i.test(message)) return "文件已损坏";
  if (/disk I\/O error/i.test(message)) return "磁盘读写错误";
  if (/database or disk is full/i.test(message)) return "磁盘已满";
  if (/database is locked|busy/i.test(message)) return "数据库被另一个进程锁定";
  if (/unable to open database file/i.test(message)) return "无法打开数据库文件";
  return `SQLite 错误：${message}`;
}

/** Gives a user a fresh random factory default password; the only password ever logged. */
export async function seedDefaultPassword(users: UserRepo, userId: string, log: Logger): Promise<void> {
  const password = randomReadable(16);
  users.setPassword(userId, await hashPassword(password), true);
  const user = users.byId(userId)!;
  log.info("已设置出厂默认密码，请登录后立即修改", { user: user.name, password });
}

/** The password hash of an account no password opens (the admin row before its factory password). */
const NO_PASSWORD = "!";

/**
 * The built-in administrator with its factory password, logged once. Also completes an admin a
 * start left without a password (stopped between the row and the hash: nobody could log in, and
 * only `kura reset-password` got out of it). serve.ts calls this only once it listens: a first
 * start that could not take its port used to spend the one logged password on a run that ended.
 */
export async function ensureBuiltinAdmin(db: Database, log: Logger): Promise<void> {
  const users = new UserRepo(db);
  const existing = users.byId(BUILTIN_ADMIN_ID);
  if (existing && existing.password_hash !== NO_PASSWORD) return;
  if (!existing) {
    users.insert({
      id: BUILTIN_ADMIN_ID,
      name: BUILTIN_ADMIN_NAME,
      role: "admin",
      password_hash: NO_PASSWORD,
      must_change_password: 1,
      quota_bytes: null,
      default_ttl_hours: null,
      disabled: 0,
    });
  }
  await seedDefaultPassword(users, BUILTIN_ADMIN_ID, log);
}
