/**
 * `kura backup` with a channel it cannot write: the snapshot still goes where it can, each channel
 * left without it is named in a WARN line, and the exit code says the backup is incomplete.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { runKuraIn } from "../helpers/cli";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

describe("kura backup with a channel it cannot write", () => {
  test("an unhealthy channel and a failed write each get a WARN line; the snapshot is written elsewhere; exit 1", async () => {
    const dataDir = tempDir("kura-backup-skip-");
    const disks = tempDir("kura-backup-disks-");
    const [gone, noBackups] = [join(disks, "gone"), join(disks, "no-backups")];
    const server = await KuraServer.start({ dataDir });
    try {
      const admin = await adminSession(server);
      for (const [name, path] of [
        ["gone", gone],
        ["no-backups", noBackups],
      ]) {
        mkdirSync(path!);
        await admin.json("POST", "/api/admin/channels", { name, driver: "local", config: { path } }, 201);
      }
    } finally {
      await server.stop();
    }
    // The disk of one is not mounted any more (its path is no directory); the other's backup folder cannot be created.
    rmSync(gone, { recursive: true });
    writeFileSync(gone, "not a directory");
    mkdirSync(join(noBackups, "_kura"), { recursive: true });
    writeFileSync(join(noBackups, "_kura", "backups"), "not a directory");

    const r = await runKuraIn(dataDir, ["backup"], { KURA_DATA_DIR: dataDir });
    expect(r.code, r.out + r.err).toBe(1);
    expect(r.err).toMatch(/level=WARN msg=存储渠道不可用，快照未写入该渠道 channel=gone err=\S/);
    expect(r.err).toMatch(/level=WARN msg=快照未能写入该渠道（写入失败，原因见元数据备份失败） channel=no-backups/);
    expect(r.err).toMatch(/level=ERROR msg=元数据备份失败 err=.*no-backups/);
    const name = /已写入快照 (kura-\d{8}-\d{6}\.\d{3}\.db)（\d+ 字节）到存储渠道：local；2 个存储渠道未写入/.exec(r.out)?.[1];
    expect(name, r.out).toBeDefined();
    expect(existsSync(join(dataDir, "storage/_kura/backups", name!))).toBe(true);

    // Every channel writable again: a quiet backup, exit 0.
    rmSync(gone);
    mkdirSync(gone);
    rmSync(join(noBackups, "_kura", "backups"));
    const again = await runKuraIn(dataDir, ["backup"], { KURA_DATA_DIR: dataDir });
    expect(again.code, again.out + again.err).toBe(0);
    expect(again.err).not.toContain("level=WARN");
    expect(again.out).toMatch(/到存储渠道：(local|gone|no-backups)(、(local|gone|no-backups)){2}$/m);
    expect(readdirSync(join(gone, "_kura", "backups"))).toHaveLength(1);
  }, 90_000);
});
