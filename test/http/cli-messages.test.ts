/**
 * What the maintenance commands print is Chinese: a file system that refuses them is named with
 * the path (never Node's "EISDIR: illegal operation on a directory, rename …"), and `kura check`
 * names replica states as the console does, not by their identifiers (done, pending, failed).
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { runKuraIn } from "../helpers/cli";
import { adminSession } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
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

test("kura check names the replica states in Chinese", async () => {
  const dataDir = tempDir("kura-check-states-");
  const server = await KuraServer.start({ dataDir });
  const admin = await adminSession(server);
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(16, 12, 5), "a.jpg"));
  await server.stop();
  const run = await runKuraIn(dataDir, ["check"], { KURA_DATA_DIR: dataDir });
  expect(run.code).toBe(0);
  const states = run.out.split("\n").find((l) => l.includes("副本状态"));
  expect(states).toBe("[正常] 副本状态：已完成 1");
  for (const line of run.out.trim().split("\n")) expectUserMessage(line);
});
