import type { Database } from "bun:sqlite";
import { dirname } from "node:path";
import { databasePath, type MigrationPendingError, openReadOnly } from "../boot";
import type { Bootstrap } from "../config/bootstrap";
import type { AppContext } from "../context";
import { type CountedTable, foreignKeyViolations, integrityCheck, rowCount } from "../db/health";
import { isSqliteDamage } from "../db/damage";
import { schemaVersion } from "../db/open";
import { replicaStateName } from "../shared/replica-states";
import { describeFailure } from "../startup-errors";
import { openForMaintenance } from "./maintenance";

interface Finding {
  ok: boolean;
  line: string;
}

/** Integrity as a finding, and whether the file could be read at all (damage SQLite throws on ends the check). */
function integrityFinding(db: Database, dataDir: string): Finding & { readable: boolean } {
  try {
    const integrity = integrityCheck(db);
    const ok = integrity.length === 1 && integrity[0] === "ok";
    return { ok, readable: true, line: `数据库完整性：${ok ? "正常" : integrity.slice(0, 5).join("；")}` };
  } catch (err) {
    if (!isSqliteDamage(err)) throw err;
    return { ok: false, readable: false, line: `数据库完整性：${describeFailure(err, dataDir)}` };
  }
}

const damageFinding = (err: unknown, dataDir: string): Finding => ({ ok: false, line: `读取数据库：${describeFailure(err, dataDir)}` });

/** The checks that follow a readable integrity check: a damaged page one of them reads is a finding, not an exception. */
async function guarded(dataDir: string, run: () => Finding[] | Promise<Finding[]>): Promise<Finding[]> {
  try {
    return await run();
  } catch (err) {
    if (!isSqliteDamage(err)) throw err;
    return [damageFinding(err, dataDir)];
  }
}

const foreignKeyFinding = (db: Database): Finding => {
  const foreign = foreignKeyViolations(db);
  return { ok: foreign === 0, line: `外键检查：${foreign === 0 ? "正常" : `${foreign} 处引用失效`}` };
};

function checkDatabase(app: AppContext): Finding[] {
  const count = (table: CountedTable) => rowCount(app.db, table);
  const states = app.images.replicaStateCounts();
  return [
    foreignKeyFinding(app.db),
    { ok: true, line: `结构版本：${schemaVersion(app.db)}` },
    { ok: true, line: `用户 ${count("users")}，图片 ${count("images")}，文件 ${count("blobs")}，存储渠道 ${count("channels")}` },
    { ok: true, line: `副本状态：${states.map((s) => `${replicaStateName(s.state)} ${s.n}`).join("，") || "无"}` },
  ];
}

async function checkChannels(app: AppContext): Promise<Finding[]> {
  const findings: Finding[] = [];
  for (const channel of app.channels.list()) {
    const replicas = app.images.doneReplicasOn(channel.row.id);
    // Deep probe: a real write, read and delete, as the channel test in the console does.
    const after = await app.channels.probe(channel.row.id, true);
    const ok = !!after?.healthy;
    const label = `存储渠道 ${channel.row.name}（${channel.row.driver}${channel.row.deleting ? "，清空中" : ""}）`;
    findings.push({ ok, line: `${label}：${ok ? "正常" : `异常：${after?.row.last_error || "无法加载"}`}，已完成副本 ${replicas}` });
  }
  if (!findings.length) findings.push({ ok: false, line: "没有任何存储渠道" });
  return findings;
}

function report(findings: Finding[], done: string): number {
  for (const f of findings) console.log(`${f.ok ? "[正常]" : "[异常]"} ${f.line}`);
  const bad = findings.filter((f) => !f.ok).length;
  console.log(bad ? `检查完成：${bad} 项异常` : done);
  return bad ? 1 : 0;
}

/**
 * The file read without writing anything: integrity and foreign keys, then `more`. For an older
 * schema than this binary's, the check stays read-only (the old binary may still be the installed
 * service, and a migrated file would no longer start it), and channels are not probed, since their
 * code needs the current schema. For a database too damaged to open the service's way, `more`
 * says why it could not.
 */
async function checkReadOnly(path: string, more: Finding[], done: string): Promise<number> {
  let db: Database;
  try {
    db = openReadOnly(path);
  } catch (err) {
    console.log(`[异常] 无法只读打开数据库 ${path}：${describeFailure(err, dirname(path))}`);
    return 1;
  }
  try {
    const integrity = integrityFinding(db, dirname(path));
    const foreign = integrity.readable ? await guarded(dirname(path), () => [foreignKeyFinding(db)]) : [];
    return report([integrity, ...foreign, ...more], done);
  } finally {
    db.close();
  }
}

const checkBeforeMigration = (pending: MigrationPendingError) =>
  checkReadOnly(
    pending.path,
    [
      {
        ok: true,
        line: `结构版本：${pending.found}，本程序会迁移到 ${pending.latest}：下次用本程序启动服务时自动迁移（迁移前先保存副本 kura.db.before-migration-v${pending.found}-<时间>）；kura check 不做迁移，未改动任何文件`,
      },
    ],
    "检查完成：数据库正常；存储渠道要在迁移后检查（用新版本启动服务后再运行 kura check）",
  );

/** `kura check`: verifies the database and probes every channel; exit 1 when anything is wrong. */
export async function checkDataDir(boot: Bootstrap): Promise<number> {
  let app: AppContext | MigrationPendingError | number;
  try {
    app = await openForMaintenance(boot, "check", "report");
  } catch (err) {
    // Damage in a page the start reads (settings, channels) stops the context from being built.
    if (!isSqliteDamage(err)) throw err;
    return checkReadOnly(databasePath(boot.dataDir), [damageFinding(err, boot.dataDir)], "");
  }
  if (typeof app === "number") return app;
  if (!("db" in app)) return checkBeforeMigration(app);
  try {
    const integrity = integrityFinding(app.db, boot.dataDir);
    // Nothing else is read from, or written to (channel health), a file SQLite cannot read.
    if (!integrity.readable) return report([integrity], "");
    const rest = await guarded(boot.dataDir, async () => [...checkDatabase(app), ...(await checkChannels(app))]);
    return report([integrity, ...rest], "检查完成：全部正常");
  } finally {
    app.db.close();
  }
}
