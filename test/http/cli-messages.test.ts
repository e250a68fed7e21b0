/**
 * What the maintenance commands print when the file system refuses them is Chinese, naming the
 * path: never Node's "EISDIR: illegal operation on a directory, rename …".
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { runKuraIn } from "../helpers/cli";
import { expectUserMessage } from "../helpers/messages";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

test("kura restore onto a restore.staged.db that is a directory names it", async () => {
  const dataDir = tempDir("kura-restore-dir-");
  const server = await KuraServer.start({ dataDir });
  await server.stop();
  const snapshot = join(tempDir("kura-restore-src-"), "snapshot.db");
  copyFileSync(join(dataDir, "kura.db"), snapshot);
  const staged = join(dataDir, "restore.staged.db");
  mkdirSync(join(staged, "in-the-way"), { recursive: true });
  const run = await runKuraIn(dataDir, ["restore", snapshot], { KURA_DATA_DIR: dataDir });
  expect(run.code).toBe(1);
  const line = run.err.trim();
  expect(line).toStartWith(`无法把快照写入数据目录 ${dataDir}：${staged} 是一个目录`);
  expectUserMessage(line);
});
