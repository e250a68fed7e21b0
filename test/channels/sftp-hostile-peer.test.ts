import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Driver } from "../../src/channels/driver.ts";
import { createSftpDriver, type SftpDriverOptions } from "../../src/channels/drivers/sftp.ts";
import { obscure } from "../../src/channels/rclone/obscure.ts";
import { errorOf } from "../helpers/rejection";
import { listKeys, readAll } from "./conformance.ts";
import { startSftpPeer } from "./servers/sftp-peer.ts";

const scratch = await mkdtemp(join(tmpdir(), "kura-sftp-peer-"));
const root = join(scratch, "root");
await mkdir(root);
const peer = await startSftpPeer(root);
const drivers: Driver[] = [];
afterAll(async () => {
  for (const d of drivers) await d.close?.();
  await peer.stop();
  await rm(scratch, { recursive: true, force: true });
});
beforeEach(() => {
  for (const key of Object.keys(peer.ctl)) delete peer.ctl[key as keyof typeof peer.ctl];
});

function driverFor(opts: SftpDriverOptions = {}, extra: Record<string, string> = {}): Driver {
  const driver = createSftpDriver({ host: "127.0.0.1", port: String(peer.port), user: "kura", pass: obscure(peer.password), ...extra }, opts);
  drivers.push(driver);
  return driver;
}

describe("SFTP listings a server never ends (H2)", () => {
  test("entries arrive batch by batch while the listing is still going; stopping early closes the handle", async () => {
    peer.ctl.readdir = "endless";
    const driver = driverFor({ timeoutMs: 5_000 });
    const seen: string[] = [];
    for await (const info of driver.list("")) {
      seen.push(info.key);
      if (seen.length === 300) break;
    }
    expect(seen.length).toBe(300);
    // Three or four READDIRs, not the whole (endless) directory.
    expect(peer.stats.readdir).toBeLessThan(10);
    expect(peer.stats.openDirs).toBe(0);
  });

  test("past the entry cap the listing fails in Chinese, and the handle is closed", async () => {
    peer.ctl.readdir = "endless";
    const driver = driverFor({ listLimits: { entriesPerDir: 5_000 } });
    const err = await errorOf(listKeys(driver, ""));
    expect(err.message).toBe("SFTP 列出失败: /: 目录条目超过 5000 个 (服务器未结束列表)，已停止列出");
    expect(peer.stats.openDirs).toBe(0);
  });

  test("a name longer than the cap fails the listing", async () => {
    peer.ctl.readdir = "hugename";
    const err = await errorOf(listKeys(driverFor(), "img/"));
    expect(err.message).toBe("SFTP 列出失败: img: 目录中有名称超过 1024 字节的条目，已停止列出");
    expect(peer.stats.openDirs).toBe(0);
  });

  test("endless nesting stops at the depth bound, with every level's handle closed", async () => {
    peer.ctl.readdir = "deep";
    const before = peer.stats.opendir;
    const err = await errorOf(listKeys(driverFor(), ""));
    expect(err.message).toStartWith("SFTP 列出失败: d/d/d/");
    expect(err.message).toEndWith(": 目录层级超过 32 层，已停止列出");
    expect(peer.stats.opendir - before).toBe(33);
    expect(peer.stats.openDirs).toBe(0);
  });
});

describe("the watchdog times each READDIR, not the whole listing (M3)", () => {
  test("a directory answered steadily every 250 ms lists completely, though it takes longer than the 1 s timeout", async () => {
    Object.assign(peer.ctl, { readdir: "slow", replies: 10, delayMs: 250 });
    const started = performance.now();
    const keys = await listKeys(driverFor({ timeoutMs: 1_000 }), "");
    expect(keys.length).toBe(1_000);
    expect(keys).toContain("slow-10-99.dat");
    expect(performance.now() - started).toBeGreaterThan(2_500);
    expect(peer.stats.openDirs).toBe(0);
  });
});

describe("a read that ends before the reported size (L1)", () => {
  test("says that the data ended early, not 连接异常", async () => {
    await writeFile(join(root, "short.bin"), new Uint8Array(5_000).fill(1));
    peer.ctl.read = "zero";
    const { stream, size } = await driverFor().get("short.bin");
    expect(size).toBe(5_000);
    const err = await errorOf(readAll(stream));
    expect(err.message).toBe("SFTP 读取失败: short.bin: 数据在达到预期大小之前就结束了 (文件比服务器报告的短，或在读取过程中变短了)");
  });
});

describe("host keys (M2: README, 'SFTP host keys')", () => {
  test("a driver keeps the key it first trusted, as does known_hosts_file; only known_hosts_file = none accepts another", async () => {
    const knownHosts = join(scratch, "known_hosts");
    await writeFile(knownHosts, `${peer.knownHostsLine()}\n`);
    const seen: string[] = [];
    const firstUse = driverFor({ onHostKey: (fp) => seen.push(fp) });
    const pinned = driverFor({}, { known_hosts_file: knownHosts });
    const unchecked = driverFor({}, { known_hosts_file: "none" });
    try {
      for (const d of [firstUse, pinned, unchecked]) await d.probe(false);
      expect(seen).toEqual([peer.fingerprint()]);

      // The restart drops their connections (a closed driver would connect no more): each connects again.
      await peer.replaceHostKey();
      const offered = peer.stats.passwordsOffered;
      expect((await errorOf(pinned.probe(false))).message).toContain("主机密钥与 known_hosts 中记录的不一致");
      expect((await errorOf(firstUse.probe(false))).message).toContain("主机密钥与记录的指纹不一致");
      expect(peer.stats.passwordsOffered).toBe(offered);
      // The explicit opt-out accepts the impostor and hands it the password.
      await unchecked.probe(false);
      expect(peer.stats.passwordsOffered).toBe(offered + 1);
    } finally {
      for (const d of [firstUse, pinned, unchecked]) await d.close?.();
    }
  });
});
