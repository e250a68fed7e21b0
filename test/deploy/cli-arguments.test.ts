/**
 * The command line as an operator types it: help and version flags, and arguments a command does
 * not take, refused with the usage before anything is created, read or written.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { runKuraIn, treeState } from "../helpers/cli";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

describe("help and version", () => {
  test.each(["--help", "-h", "help", "check --help", "restore -h"])("kura %s prints the usage on stdout and exits 0", async (line) => {
    const cwd = tempDir("kura-help-");
    const r = await runKuraIn(cwd, line.split(" "));
    expect([r.code, r.err]).toEqual([0, ""]);
    expect(r.out).toStartWith("用法: kura");
    for (const command of ["serve", "reset-password [用户名]", "backup", "check", "restore <快照文件>", "version", "selftest"]) {
      expect(r.out).toContain(command);
    }
    expect(readdirSync(cwd)).toEqual([]);
  });

  test("kura --version acts as kura version", async () => {
    const r = await runKuraIn(tempDir("kura-version-"), ["--version"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^kura \d+\.\d+\.\d+（提交 [0-9a-z]+，构建于 [0-9TZ:.-]+）\n$/);
  });
});

describe("arguments a command does not take", () => {
  test("kura serve --port 1 is refused with the usage and creates no ./data", async () => {
    const cwd = tempDir("kura-serve-args-");
    const r = await runKuraIn(cwd, ["serve", "--port", "1"], {}, [], 15_000);
    expect(r.code).toBe(2);
    expect(r.err).toContain("kura serve 不接受选项 --port");
    expect(r.err).toContain("用法: kura");
    expect(r.out + r.err).not.toContain("password=");
    expect(readdirSync(cwd)).toEqual([]);
    // The same for a word where no argument belongs, and for an unknown leading flag.
    for (const argv of [
      ["serve", "now"],
      ["--port", "1"],
    ]) {
      const again = await runKuraIn(cwd, argv, {}, [], 15_000);
      expect([argv, again.code]).toEqual([argv, 2]);
      expect(again.err).toContain("用法: kura");
    }
    expect(readdirSync(cwd)).toEqual([]);
  });

  describe("on an existing data directory", () => {
    let dataDir: string;
    beforeAll(async () => {
      dataDir = tempDir("kura-args-data-");
      const server = await KuraServer.start({ dataDir });
      await server.stop();
    });

    test.each([
      [["backup", "--dry-run"], "kura backup 不接受选项 --dry-run"],
      [["backup", "now"], "kura backup 的参数过多：now"],
      [["check", "--quick"], "kura check 不接受选项 --quick"],
      [["reset-password", "admin", "bob"], "kura reset-password 的参数过多：bob"],
      [["reset-password", ""], "kura reset-password 的参数不能为空"],
      [["reset-password", "--user", "admin"], "kura reset-password 不接受选项 --user"],
      [["restore"], "kura restore 缺少参数"],
      [["restore", "a.db", "b.db"], "kura restore 的参数过多：b.db"],
      [["restore", "--force", "a.db"], "kura restore 不接受选项 --force"],
      [["version", "extra"], "kura version 的参数过多：extra"],
    ])("kura %p is refused with the usage, exit 2, and changes nothing", async (argv, reason) => {
      const before = treeState(dataDir);
      const r = await runKuraIn(dataDir, argv, { KURA_DATA_DIR: dataDir });
      expect([r.code, r.out]).toEqual([2, ""]);
      expect(r.err).toStartWith(`${reason}\n用法: kura`);
      expect(treeState(dataDir)).toEqual(before);
    });

    test("a user name after -- may start with a dash (and is then looked up as given)", async () => {
      const r = await runKuraIn(dataDir, ["reset-password", "--", "-bob"], { KURA_DATA_DIR: dataDir });
      expect(r.code).toBe(1);
      expect(r.err).toContain("用户不存在 user=-bob");
    });
  });
});
