import { expect, test } from "bun:test";
import { readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { KuraServer, runCli } from "../helpers/server";

const COPY = /^kura\.db\.before-restore-\d{8}-\d{6}\.\d{3}(-wal|-shm)?$/;
const copiesIn = (dir: string) =>
  readdirSync(dir)
    .filter((f) => COPY.test(f))
    .sort();

test("repeated restores keep only the newest 3 kura.db.before-restore-* sets, each removed whole", async () => {
  let server = await KuraServer.start();
  const dataDir = server.dataDir;
  try {
    const admin = await adminSession(server);
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    const file = join(dataDir, "..", `${snap.name}-${process.pid}`);
    await Bun.write(file, await (await admin.request("GET", `/api/admin/backups/${snap.name}`)).arrayBuffer());
    await server.stop();
    // A set left by an older restore, with the WAL files a crashed server leaves beside its database.
    const old = "kura.db.before-restore-20200101-000000.000";
    for (const suffix of ["", "-wal", "-shm"]) writeFileSync(join(dataDir, old + suffix), "old");
    // Unrelated files that only look alike stay.
    writeFileSync(join(dataDir, "kura.db.before-migration-v1-20200101-000000.000"), "x");
    writeFileSync(join(dataDir, "other.db.before-restore-20200101-000000.000"), "x");

    const written: string[] = [];
    for (let i = 0; i < 4; i++) {
      const staged = await runCli(["restore", file], { KURA_DATA_DIR: dataDir });
      expect(staged.code, staged.err).toBe(0);
      server = await KuraServer.start({ dataDir });
      const previous = server.logs.match(/msg=已换入快照，原数据库已保留 previous=\S+\/(kura\.db\.before-restore-\S+)/)![1]!;
      written.push(previous);
      // The copy this start just wrote is always among those kept.
      expect(copiesIn(dataDir)).toContain(previous);
      expect(copiesIn(dataDir).filter((f) => !f.endsWith("-wal") && !f.endsWith("-shm")).length).toBeLessThanOrEqual(3);
      if (i === 2) expect(server.logs).toMatch(new RegExp(`msg=已删除较早的恢复前数据库副本 removed=${old.replaceAll(".", "\\.")} kept=3`));
      await server.stop();
      await Bun.sleep(5); // distinct millisecond stamps
    }
    expect(copiesIn(dataDir).filter((f) => !f.endsWith("-wal") && !f.endsWith("-shm"))).toEqual(written.slice(1));
    expect(readdirSync(dataDir).filter((f) => f.startsWith(old))).toEqual([]);
    expect(readdirSync(dataDir)).toContain("kura.db.before-migration-v1-20200101-000000.000");
    expect(readdirSync(dataDir)).toContain("other.db.before-restore-20200101-000000.000");
    rmSync(file, { force: true });
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);
