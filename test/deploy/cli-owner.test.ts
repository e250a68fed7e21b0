/**
 * Maintenance commands run by another user than the data directory's owner (`sudo kura check`
 * on a directory of the `kura` user) would leave files the service cannot open (tmp/, the probe
 * folder, snapshots, a staged restore) and keep it from starting: they refuse before touching it.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, copyFileSync, lstatSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { runKuraIn, treeState } from "../helpers/cli";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;
const AS_NOBODY = ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"];

const tempDir = useTempDirs();

function chownTree(path: string, uid: number) {
  chownSync(path, uid, uid);
  if (lstatSync(path).isDirectory()) for (const name of readdirSync(path)) chownTree(join(path, name), uid);
}

describe.if(isRoot)("a maintenance command run as another user than the data directory's owner", () => {
  let dataDir: string;
  let snapshot: string;
  beforeAll(async () => {
    dataDir = tempDir("kura-owner-");
    const server = await KuraServer.start({ dataDir });
    await server.stop();
    // The database after a clean stop is a whole snapshot that `kura restore` would accept.
    snapshot = join(tempDir("kura-owner-snap-"), "kura-20260101-000000.000.db");
    copyFileSync(join(dataDir, "kura.db"), snapshot);
  });

  test("as root on a directory owned by nobody: each command refuses, names the owner and the command to run, and creates nothing", async () => {
    chownTree(dataDir, NOBODY);
    try {
      await refusedAsRoot();
    } finally {
      chownTree(dataDir, 0);
    }
  });

  async function refusedAsRoot() {
    const before = treeState(dataDir);
    for (const argv of [["check"], ["backup"], ["reset-password"], ["reset-password", "admin"], ["restore", snapshot]]) {
      const r = await runKuraIn(dataDir, argv, { KURA_DATA_DIR: dataDir });
      expect([argv, r.code]).toEqual([argv, 1]);
      expect(r.err).toContain(
        `level=ERROR msg="请以数据目录的属主 nobody（uid ${NOBODY}）运行此命令，例如：sudo -u nobody env KURA_DATA_DIR=${dataDir} kura ${argv.join(" ")}`,
      );
      expect(r.err.trim().split("\n")).toHaveLength(1);
      expect(r.out).toBe("");
      expect(treeState(dataDir)).toEqual(before);
    }
  }

  test("as nobody on a root-owned directory: refused the same way", async () => {
    const before = treeState(dataDir);
    for (const argv of [["check"], ["backup"]]) {
      const r = await runKuraIn(tmpdir(), argv, { KURA_DATA_DIR: dataDir, HOME: "/nonexistent" }, AS_NOBODY);
      expect([argv, r.code]).toEqual([argv, 1]);
      expect(r.err).toContain(`请以数据目录的属主 root（uid 0）运行此命令，例如：sudo -u root env KURA_DATA_DIR=${dataDir} kura ${argv[0]}`);
    }
    expect(treeState(dataDir)).toEqual(before);
  });

  test("kura restore of a snapshot its user cannot read says so, not that the file is missing or the data directory's owner is wrong", async () => {
    chownTree(dataDir, NOBODY);
    // As the recovery steps leave it: downloaded by root into root's own 0700 home, or readable by root alone.
    const privateDir = tempDir("kura-owner-private-");
    chmodSync(privateDir, 0o700);
    const hidden = join(privateDir, "kura-20260101-000000.000.db");
    copyFileSync(snapshot, hidden);
    const rootOnly = join(tempDir("kura-owner-open-"), "kura-20260101-000000.000.db");
    copyFileSync(snapshot, rootOnly);
    chmodSync(rootOnly, 0o600);
    chmodSync(dirname(rootOnly), 0o755);
    try {
      const before = treeState(dataDir);
      for (const file of [hidden, rootOnly]) {
        const r = await runKuraIn(tmpdir(), ["restore", file], { KURA_DATA_DIR: dataDir, HOME: "/nonexistent" }, AS_NOBODY);
        expect([file, r.code]).toEqual([file, 1]);
        expect(r.err.trim()).toBe(`当前用户（uid ${NOBODY}）无法读取快照文件 ${file}：请把它放到该用户可读的位置（例如数据目录中），或调整其权限后重试`);
      }
      expect(treeState(dataDir)).toEqual(before);
      // A file that is not there is still named as missing.
      const missing = await runKuraIn(tmpdir(), ["restore", join(dirname(rootOnly), "none.db")], { KURA_DATA_DIR: dataDir, HOME: "/nonexistent" }, AS_NOBODY);
      expect(missing.err.trim()).toBe(`找不到快照文件：${join(dirname(rootOnly), "none.db")}`);
    } finally {
      chownTree(dataDir, 0);
    }
  });

  test("as its owner the command runs as before", async () => {
    const r = await runKuraIn(dataDir, ["check"], { KURA_DATA_DIR: dataDir });
    expect(r.out).toContain("[正常] 数据库完整性：正常");
    expect(r.err).not.toContain("请以数据目录的属主");
  });
});
