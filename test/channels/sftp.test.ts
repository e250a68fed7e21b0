import { afterAll, describe, expect, test } from "bun:test";
import { createHmac, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSftpDriver, sftpDriverOptions } from "../../src/channels/drivers/sftp.ts";
import { obscure } from "../../src/channels/rclone/obscure.ts";
import { chunkedStream, driverConformance, listKeys, readAll } from "./conformance.ts";
import { generateKey, startSshd } from "./servers/sshd.ts";
import { errorOf } from "../helpers/rejection";

const scratch = await mkdtemp(join(tmpdir(), "kura-sftp-test-"));
await mkdir(join(scratch, "sshd"));
const sshd = await startSshd(join(scratch, "sshd"));
const storage = join(scratch, "storage");
await mkdir(storage);
afterAll(async () => {
  await sshd.stop();
  await rm(scratch, { recursive: true, force: true });
});

function config(overrides: Record<string, string> = {}): Record<string, string> {
  return { host: "127.0.0.1", port: String(sshd.port), user: sshd.user, key_pem: sshd.clientKey, path: storage, ...overrides };
}

let counter = 0;
driverConformance("sftp (OpenSSH sshd, key_pem, absolute path)", async () => {
  const driver = createSftpDriver(config({ path: join(storage, `conformance-${++counter}`, "nested") }));
  return { driver, cleanup: async () => {} };
});

describe("sftp against OpenSSH: what lands on the server", () => {
  const base = join(storage, "disk");
  const driver = createSftpDriver(config({ path: base }));
  afterAll(() => driver.close?.());

  test("objects are plain files under path; parents are created; no temp files remain", async () => {
    const bytes = new Uint8Array(randomBytes(200_000));
    await driver.put("a b/ü/obj.bin", chunkedStream(bytes, 7_000), bytes.byteLength);
    expect(Buffer.compare(await readFile(join(base, "a b/ü/obj.bin")), bytes)).toBe(0);
    expect(await readdir(join(base, "a b/ü"))).toEqual(["obj.bin"]);
  });

  test("a failed upload leaves neither the object nor a temp file; an old version survives", async () => {
    await driver.put("keep/obj", new Uint8Array([1, 2, 3]), 3);
    const err = await errorOf(driver.put("keep/obj", chunkedStream(new Uint8Array(50), 10), 500));
    expect(err.message).toContain("对象大小不符");
    expect(await readdir(join(base, "keep"))).toEqual(["obj"]);
    expect(Array.from(await readFile(join(base, "keep/obj")))).toEqual([1, 2, 3]);
  });

  test("files written by another client are listed; temp-file names are not", async () => {
    await mkdir(join(base, "foreign/sub"), { recursive: true });
    await writeFile(join(base, "foreign/sub/x.jpg"), new Uint8Array(9));
    await writeFile(join(base, "foreign/.x.jpg.kura-tmp-0123abcd"), new Uint8Array(1));
    const infos = [];
    for await (const info of driver.list("foreign/")) infos.push(info);
    expect(infos.map((i) => [i.key, i.size])).toEqual([["foreign/sub/x.jpg", 9]]);
    expect(Math.abs(infos[0].modified!.getTime() - Date.now())).toBeLessThan(120_000);
    await expect(driver.put("foreign/.x.jpg.kura-tmp-0123abcd", new Uint8Array(1), 1)).rejects.toThrow("临时文件");
  });

  test("many concurrent operations share one connection", async () => {
    const items = Array.from({ length: 24 }, (_, i) => ({ key: `many/${i % 4}/o${i}`, bytes: new Uint8Array(randomBytes(30_000 + i)) }));
    await Promise.all(items.map((it) => driver.put(it.key, it.bytes, it.bytes.byteLength)));
    const back = await Promise.all(items.map(async (it) => readAll((await driver.get(it.key, { start: 5, end: 29_999 })).stream)));
    for (const [i, b] of back.entries()) expect(Buffer.compare(b, items[i].bytes.subarray(5, 30_000))).toBe(0);
    expect((await listKeys(driver, "many/")).length).toBe(24);
  });
});

describe("sftp authentication and host keys", () => {
  const knownHosts = join(scratch, "known_hosts");
  const name = `[127.0.0.1]:${sshd.port}`;
  const probeWith = async (lines: string, extra: Record<string, string> = {}) => {
    await writeFile(knownHosts, lines);
    const driver = createSftpDriver(config({ known_hosts_file: knownHosts, ...extra }));
    try {
      await driver.probe(false);
    } finally {
      await driver.close?.();
    }
  };

  test("known_hosts with the server's key (plain, hashed, only the ecdsa one) is accepted", async () => {
    await probeWith(`# comment\nother.example ${sshd.hostKeys.ed25519}\n${name} ${sshd.hostKeys.ed25519}\n`);
    const salt = randomBytes(20);
    const hashed = `|1|${salt.toString("base64")}|${createHmac("sha1", salt).update(name).digest("base64")}`;
    await probeWith(`${hashed} ${sshd.hostKeys.ed25519}\n`);
    // Only the ecdsa key is known: the client must ask the server for exactly that key type.
    await probeWith(`${name},[localhost]:${sshd.port} ${sshd.hostKeys.ecdsa}\n`);
  });

  test("a different key for the host is refused (possible MITM)", async () => {
    const impostor = await generateKey(join(scratch, "impostor"), "ed25519");
    const err = await errorOf(probeWith(`${name} ${impostor}\n`));
    expect(err.message).toContain("主机密钥与 known_hosts 中记录的不一致");
  });

  test("a host missing from known_hosts, or a revoked key, is refused", async () => {
    const unknown = await errorOf(probeWith(`[127.0.0.1]:1 ${sshd.hostKeys.ed25519}\n`));
    expect(unknown.message).toContain("known_hosts 中没有该主机");
    const revoked = await errorOf(probeWith(`${name} ${sshd.hostKeys.ed25519}\n@revoked * ${sshd.hostKeys.ed25519}\n`));
    expect(revoked.message).toContain("吊销");
  });

  test("wrong password: probe fails with an auth error that never contains the password", async () => {
    const wrong = "wrong-Pa55word!";
    const obscured = obscure(wrong);
    const driver = createSftpDriver(config({ key_pem: "", pass: obscured }));
    const err = await errorOf(driver.probe(false));
    expect(err.message).toContain("认证失败");
    expect(err.message).not.toContain(wrong);
    expect(err.message).not.toContain(obscured);
  });

  test("key_file with key_file_pass (encrypted OpenSSH key), and key_pem in rclone's one-line form", async () => {
    const keyPath = join(scratch, "encrypted_key");
    const publicLine = await generateKey(keyPath, "ed25519", "key-Pass");
    await writeFile(join(scratch, "sshd/authorized_keys"), `${publicLine}\n`, { flag: "a" });
    const driver = createSftpDriver(config({ key_pem: "", key_file: keyPath, key_file_pass: obscure("key-Pass") }));
    await driver.probe(true);
    await driver.close?.();
    const wrongPass = createSftpDriver(config({ key_pem: "", key_file: keyPath, key_file_pass: obscure("nope") }));
    expect((await errorOf(wrongPass.probe(false))).message).toContain("key_file_pass");

    const oneLine = createSftpDriver(config({ key_pem: sshd.clientKey.trim().replace(/\n/g, "\\n") }));
    await oneLine.probe(false);
    await oneLine.close?.();
  });

  test("config validation", () => {
    expect(() => createSftpDriver({ key_pem: sshd.clientKey })).toThrow("缺少 host");
    expect(() => createSftpDriver(config({ port: "70000" }))).toThrow("port");
    expect(() => createSftpDriver(config({ key_pem: "", pass: "not obscured!" }))).toThrow("obscure");
    expect(() => createSftpDriver(config({ key_pem: "-----BEGIN OPENSSH PRIVATE KEY-----\ngarbage\n-----END OPENSSH PRIVATE KEY-----" }))).toThrow("key_pem");
    expect(() => createSftpDriver(config({ path: "/srv/../etc" }))).toThrow("path");
    expect(sftpDriverOptions.map((o) => o.key).sort()).toEqual(
      ["host", "host_key_sha256", "key_file", "key_file_pass", "key_pem", "known_hosts_file", "pass", "path", "port", "user"].sort(),
    );
    for (const key of ["pass", "key_pem", "key_file_pass"]) expect(sftpDriverOptions.find((o) => o.key === key)?.sensitive).toBe(true);
  });
});

describe("sftp server restarts", () => {
  test("a dropped connection is re-established transparently (reads, and uploads before any byte is sent)", async () => {
    const driver = createSftpDriver(config({ path: join(storage, "drop") }));
    await driver.put("obj", new Uint8Array([9]), 1);
    for (let round = 0; round < 3; round++) {
      sshd.dropConnections();
      expect((await driver.head("obj"))?.size).toBe(1);
      expect(await listKeys(driver, "")).toEqual(["obj"]);
    }
    // Uploads too: the temp file is opened on a fresh connection before any byte is sent.
    sshd.dropConnections();
    await driver.put("streamed", chunkedStream(new Uint8Array(100_000).fill(3), 10_000), 100_000);
    expect((await driver.head("streamed"))?.size).toBe(100_000);
    await driver.close?.();
  });

  test("server down: probe fails in Chinese; back up: the same driver reconnects", async () => {
    const driver = createSftpDriver(config({ path: join(storage, "restart") }));
    await driver.put("kept.bin", new Uint8Array([4, 2]), 2);
    await sshd.stop();
    const err = await errorOf(driver.probe(false));
    expect(err.message).toContain("SFTP 连接失败");
    expect(err.message).toContain("连接被拒绝");
    await sshd.start();
    await driver.probe(true);
    expect(Array.from(await readAll((await driver.get("kept.bin")).stream))).toEqual([4, 2]);
    await driver.close?.();
  });
});

/** This process's established TCP connections to an sshd's port (the test's own by default). */
async function connections(port = sshd.port) {
  const out = await new Response(Bun.spawn(["ss", "-tnpH", "state", "established", `( dport = :${port} )`]).stdout).text();
  return out.split("\n").filter((line) => line.includes(`pid=${process.pid},`)).length;
}

describe("a closed driver", () => {
  test("connects no more: a call that outlived it (a listing of a retired channel driver) fails instead of opening a connection nobody closes", async () => {
    const driver = createSftpDriver(config({ path: join(storage, "closed") }));
    await driver.put("obj", new Uint8Array([1]), 1);
    await driver.close?.();
    const before = await connections();
    for (const call of [() => driver.head("obj"), () => listKeys(driver, ""), () => driver.probe(false)]) {
      expect((await errorOf(call())).message).toContain("SFTP 连接已关闭");
    }
    expect(await connections()).toBeLessThanOrEqual(before);
  });
});

describe("an SFTP server that hangs while its SSH connection lives on", () => {
  const TIMEOUT_MS = 1_000;
  /** One request deadline and a reconnect on a loaded machine (CI's 2 busy cores took ~5 s for an SSH handshake). */
  const BUDGET_MS = TIMEOUT_MS + 7_000;
  let hanging: Awaited<ReturnType<typeof startSshd>>;
  const files = join(scratch, "hang-storage");

  const timed = async <T>(work: () => Promise<T>) => {
    const t = performance.now();
    const value = await work().catch((err: Error) => err);
    return { value, ms: performance.now() - t };
  };

  test("each request has a deadline: idempotent calls go on over a fresh connection, a stream in progress fails in Chinese", async () => {
    await mkdir(join(scratch, "sshd-external"));
    await mkdir(files);
    hanging = await startSshd(join(scratch, "sshd-external"), { externalSftp: true });
    const driver = createSftpDriver(
      { host: "127.0.0.1", port: String(hanging.port), user: hanging.user, key_pem: hanging.clientKey, path: files },
      { timeoutMs: TIMEOUT_MS },
    );
    try {
      const big = new Uint8Array(randomBytes(2_000_000));
      await driver.put("obj", new Uint8Array([7]), 1);
      await driver.put("big", big, big.byteLength);

      // A read is in progress when the server freezes: the stream fails instead of waiting for good.
      const reader = (await driver.get("big")).stream.getReader();
      await reader.read();
      expect(hanging.freezeSftp(true)).toBe(1);
      const stalled = await timed(async () => {
        for (;;) if ((await reader.read()).done) return "ended";
      });
      expect(stalled.value).toBeInstanceOf(Error);
      expect((stalled.value as Error).message).toContain("SFTP 服务器 1 秒未响应");
      expect(stalled.ms).toBeLessThan(BUDGET_MS);
      // The hung connection is dropped at once, not kept until sshd answers the channel's close (which waits
      // for the frozen sftp-server to exit): else the next call would spend a whole deadline on it first.
      const dropBy = Date.now() + TIMEOUT_MS / 2;
      while ((await connections(hanging.port)) > 0 && Date.now() < dropBy) await Bun.sleep(20);
      expect(await connections(hanging.port)).toBe(0);

      // The next calls run on a new connection (a new sftp-server).
      const head = await timed(() => driver.head("obj"));
      expect(head.value).toMatchObject({ size: 1 });
      expect(head.ms).toBeLessThan(BUDGET_MS);

      // Frozen again with nothing in flight: an idempotent call waits one deadline, then succeeds over a fresh connection.
      expect(hanging.freezeSftp(true)).toBeGreaterThanOrEqual(1);
      const again = await timed(async () => Array.from(await readAll((await driver.get("obj")).stream)));
      expect(again.value).toEqual([7]);
      expect(again.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(again.ms).toBeLessThan(BUDGET_MS);
    } finally {
      hanging.freezeSftp(false);
      await driver.close?.();
      await hanging.stop();
    }
  });
});
