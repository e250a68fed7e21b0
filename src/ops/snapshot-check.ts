/**
 * Whether a file can become Kura's database: the checks a restore makes before it stages a
 * snapshot (console and `kura restore`) and again before the next start swaps it in. Before
 * them, a console restore staged any file that began with the SQLite header: a snapshot of
 * another master key or a corrupt one then failed every start, a newer schema moved the live
 * database aside first, and any other SQLite file started as an empty new installation.
 */
import { constants, Database } from "bun:sqlite";
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { hasMetaTable, readMeta } from "../db/meta";
import { MIGRATIONS } from "../db/migrations";
import { passesQuickCheck, schemaVersion } from "../db/open";

const SQLITE_HEADER = "SQLite format 3\0";
/** The meta key under which a database records the fingerprint of its master key. */
export const FINGERPRINT_KEY = "master_key_fingerprint";

export interface SnapshotCheck {
  /** The fingerprint of the master key the snapshot needs (`undefined`: refuse any). */
  keyFingerprint: string | undefined;
  /** Also read every page (`PRAGMA quick_check`): at start, not inside a request. */
  integrity: boolean;
}

/** Why the file at `path` cannot become the database, in Chinese; null when it can. */
export function snapshotProblem(path: string, check: SnapshotCheck): string | null {
  try {
    if (!statSync(path).isFile()) return "不是文件";
  } catch {
    return "文件不存在或无法读取";
  }
  if (!hasSqliteHeader(path)) return "不是 SQLite 数据库";
  let facts: { fingerprint: string | undefined; schema: number; intact: boolean };
  try {
    facts = readFacts(path, check.integrity);
  } catch {
    return "快照文件已损坏，无法读取";
  }
  if (!facts.intact) return "快照文件已损坏（完整性检查未通过）";
  if (facts.fingerprint === undefined) return "不是 Kura 的数据库快照（没有主密钥指纹）";
  if (facts.fingerprint !== check.keyFingerprint) return "主密钥与快照记录的指纹不匹配：需要拍摄该快照时的 master.key";
  const latest = MIGRATIONS.at(-1)?.version ?? 0;
  if (facts.schema > latest) return `快照的数据库结构版本 ${facts.schema} 比本程序支持的 ${latest} 新，请先升级 Kura`;
  return null;
}

function readFacts(path: string, integrity: boolean) {
  // immutable: a snapshot is one file (VACUUM INTO), and nothing may be created next to it.
  const db = new Database(`file:${encodeURI(path)}?immutable=1`, constants.SQLITE_OPEN_READONLY | constants.SQLITE_OPEN_URI);
  try {
    const intact = !integrity || passesQuickCheck(db);
    const fingerprint = hasMetaTable(db) ? readMeta(db, FINGERPRINT_KEY) : undefined;
    return { fingerprint, schema: schemaVersion(db), intact };
  } finally {
    db.close();
  }
}

export function hasSqliteHeader(file: string): boolean {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(SQLITE_HEADER.length);
    return readSync(fd, buf, 0, buf.length, 0) === buf.length && buf.toString("latin1") === SQLITE_HEADER;
  } finally {
    closeSync(fd);
  }
}
