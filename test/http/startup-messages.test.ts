/**
 * Starts that fail say why in Chinese: the runtime's own text (Bun's "Failed to listen at …",
 * Node's "EEXIST: file already exists, mkdir …") never reaches the log line an operator reads.
 */
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runKuraIn } from "../helpers/cli";
import { expectUserMessage } from "../helpers/messages";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

/** `kura serve` until it exits (or 15 s); its one ERROR line, with msg and err. */
async function failedStart(dataDir: string, env: Record<string, string> = {}) {
  const run = await runKuraIn(tmpdir(), ["serve"], { HOME: tmpdir(), KURA_DATA_DIR: dataDir, ...env }, [], 15_000);
  const errors = (run.out + run.err).split("\n").filter((l) => l.includes("level=ERROR"));
  expect({ code: run.code, errors: errors.length }).toEqual({ code: 1, errors: 1 });
  const line = errors[0]!;
  const msg = line.match(/msg=("[^"]*"|\S+)/)![1]!;
  const err = line.match(/err=("[^"]*"|\S+)/)![1]!;
  expectUserMessage(msg);
  expectUserMessage(err);
  return err;
}

describe("a start that cannot listen", () => {
  // With delivery threads the port is probed first (Bun.listen: "Failed to listen at <host>"); without, Bun.serve answers.
  test.each([
    ["999.1.1.1:8080", "2"],
    ["999.1.1.1:8080", "0"],
    ["192.0.2.1:8080", "2"],
    ["192.0.2.1:8080", "0"],
    ["[::zz]:8080", "2"],
  ])("KURA_LISTEN=%s (delivery threads %s) names the address and what to check", async (listen, threads) => {
    const err = await failedStart(tempDir("kura-listen-"), { KURA_LISTEN: listen, KURA_DELIVERY_THREADS: threads });
    expect(err).toContain(`无法监听 ${listen}`);
    expect(err).toContain("KURA_LISTEN");
  });
});

describe("a path that should be a directory but is a file", () => {
  test("KURA_DATA_DIR naming a file", async () => {
    const file = join(tempDir("kura-dd-file-"), "data");
    writeFileSync(file, "not a directory");
    const err = await failedStart(file);
    expect(err).toContain(`${file} 已存在，但不是目录`);
  });

  test("storage/ in the data directory is a file", async () => {
    const dataDir = tempDir("kura-storage-file-");
    writeFileSync(join(dataDir, "storage"), "");
    const err = await failedStart(dataDir);
    expect(err).toContain(`${join(dataDir, "storage")} 已存在，但不是目录`);
  });
});
