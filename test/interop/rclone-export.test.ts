/**
 * The exported rclone config, read by the REAL rclone binary (Debian package
 * `rclone`, v1.60.1): what Kura wrote to a channel — plain or encrypted, local
 * disk or S3 — must be listed and read byte-exact by stock rclone using only
 * the exported file, and what rclone writes into the crypt remote must be
 * readable by Kura's crypt layer. Never skipped: a missing rclone fails.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { MasterKey } from "../../src/config/master-key.ts";
import { cryptPasswords, wrapEncrypted } from "../../src/channels/crypt-layer.ts";
import type { Driver } from "../../src/channels/driver.ts";
import { createLocalDriver, localDriverOptions } from "../../src/channels/drivers/local.ts";
import type { DriverOptionSpec } from "../../src/channels/drivers/option-spec.ts";
import { createS3Driver, s3DriverOptions } from "../../src/channels/drivers/s3.ts";
import { RCLONE_OBSCURED_OPTIONS, renderRcloneConfig, type ExportableChannel } from "../../src/channels/rclone-export.ts";
import { obscure } from "../../src/channels/rclone/obscure.ts";
import { startS3, TEST_CREDENTIALS } from "../channels/s3rver-harness.ts";

const RCLONE = Bun.which("rclone");
const MISSING = "未找到 rclone 可执行文件：互操作测试需要真实的 rclone（Debian: apt-get install -y rclone），不能跳过";

const work = mkdtempSync(join(tmpdir(), "kura-rclone-export-"));
const s3 = await startS3({ directory: join(work, "s3store"), buckets: ["kura-export"] });
afterAll(async () => {
  await s3.stop().catch(() => {});
  rmSync(work, { recursive: true, force: true });
});

const master = MasterKey.generate().key;
let nextId = 100;
let fileCounter = 0;

function channel(driver: string, encrypted: boolean): ExportableChannel {
  const id = nextId++;
  return { id, name: `渠道 ${id}`, driver, encrypted: encrypted ? 1 : 0, created_at: `2026-01-0${(id % 9) + 1} 12:34:56` };
}

/** Exports the channel into a fresh writable file (rclone may rewrite its config). */
function exportTo(ch: ExportableChannel, config: Record<string, string>, options: readonly DriverOptionSpec[]): string {
  const file = join(work, `export-${++fileCounter}.conf`);
  writeFileSync(file, renderRcloneConfig(ch, config, options, master), { mode: 0o600 });
  return file;
}

/** Runs rclone with only the exported file as configuration; arguments never carry secrets. */
async function rclone(conf: string, ...args: string[]): Promise<{ bytes: Uint8Array; text: string }> {
  if (!RCLONE) throw new Error(MISSING);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // AWS_CA_BUNDLE breaks rclone 1.60's S3 remotes here; RCLONE_*/AWS_* could override the exported config.
    if (v !== undefined && !k.startsWith("RCLONE_") && !k.startsWith("AWS_")) env[k] = v;
  }
  env.XDG_CACHE_HOME = join(work, "cache");
  const proc = Bun.spawn([RCLONE, "--config", conf, ...args], { env, stdout: "pipe", stderr: "pipe", cwd: work });
  const [out, stderr, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`rclone ${args[0]} 退出码 ${code}: ${stderr}`);
  const bytes = new Uint8Array(out);
  return { bytes, text: new TextDecoder().decode(bytes) };
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const lines = (s: string) =>
  s
    .split("\n")
    .filter((l) => l.length > 0)
    .sort();
const readAll = async (s: ReadableStream<Uint8Array>) => new Uint8Array(await new Response(s).arrayBuffer());

/** Kura-shaped keys and sizes around the 64 KiB crypt block. */
function sampleObjects(): Record<string, Uint8Array> {
  const sha = randomBytes(32).toString("hex");
  return {
    [`img/${sha.slice(0, 2)}/${sha.slice(2, 4)}/${sha}-${randomBytes(4).toString("hex")}.jpg`]: new Uint8Array(randomBytes(200_000)),
    "_kura/backups/kura-20260101-000000.000.db": new Uint8Array(randomBytes(65_536)),
    "img/00/11/empty.png": new Uint8Array(0),
    "图片/空 格 ünï.webp": new Uint8Array(randomBytes(65_537)),
  };
}

async function writeAll(driver: Driver, objects: Record<string, Uint8Array>): Promise<void> {
  for (const [key, bytes] of Object.entries(objects)) await driver.put(key, bytes, bytes.byteLength);
}

/** rclone lists exactly these keys under `root` and `cat` returns each byte-exact. */
async function expectRcloneReads(conf: string, root: string, objects: Record<string, Uint8Array>): Promise<void> {
  expect(lines((await rclone(conf, "lsf", "-R", "--files-only", root)).text)).toEqual(Object.keys(objects).sort());
  for (const [key, bytes] of Object.entries(objects)) {
    expect(sha256((await rclone(conf, "cat", root + key)).bytes)).toBe(sha256(bytes));
  }
}

/** A raw (ciphertext) listing: every path segment is an encrypted name, none is a plaintext one. */
function expectNoPlainSegments(listing: string, objects: Record<string, Uint8Array>): void {
  const plain = new Set(Object.keys(objects).flatMap((k) => k.split("/")));
  const segments = lines(listing)
    .flatMap((l) => l.split("/"))
    .filter((s) => s !== "");
  expect(segments.length).toBeGreaterThanOrEqual(Object.keys(objects).length);
  for (const segment of segments) {
    expect(plain.has(segment)).toBe(false);
    expect(segment).toMatch(/^[0-9a-v]{26,}$/);
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((p) => statSync(join(dir, p)).isFile())
    .sort();
}

describe("export file as parsed by rclone", () => {
  test("header is comments only; every value reads back exactly (quotes, spaces, backticks, '#')", async () => {
    const ch = channel("local", true);
    const dir = join(work, "odd-values");
    const awkward = {
      path: dir,
      public_base_url: "https://img.example.com",
      a_leading_space: "  spaced  ",
      b_backtick: "`tick",
      c_quote: '"q',
      d_triple: '"""x"""',
      e_hash: "x ; y # z = w",
      f_unicode: "\u3000全角",
    };
    const conf = exportTo({ ...ch, name: "evil\n[kura-1]\ntype = local" }, awkward, localDriverOptions);
    const dump = JSON.parse((await rclone(conf, "config", "dump")).text) as Record<string, Record<string, string>>;
    expect(Object.keys(dump).sort()).toEqual([`kura-${ch.id}`, `kura-${ch.id}-crypt`]);
    const { path: _p, public_base_url: _u, ...rest } = awkward;
    expect(dump[`kura-${ch.id}`]).toEqual({ type: "local", ...rest });
    const crypt = dump[`kura-${ch.id}-crypt`];
    expect(crypt.type).toBe("crypt");
    expect(crypt.remote).toBe(`kura-${ch.id}:${dir}`);
    expect(crypt.filename_encryption).toBe("standard");
    expect(crypt.directory_name_encryption).toBe("true");
    // rclone itself reveals the obscured passwords to the derived ones ('--': obscured text may start with '-').
    const expected = cryptPasswords(master, ch.id, ch.created_at);
    expect((await rclone(conf, "reveal", "--", crypt.password)).text.trim()).toBe(expected.password);
    expect((await rclone(conf, "reveal", "--", crypt.password2)).text.trim()).toBe(expected.password2);
  });

  test("line breaks and bad keys are refused, OAuth token JSON is written on one line", async () => {
    const ch = channel("local", false);
    expect(() => renderRcloneConfig(ch, { path: "/x", user: "a\n[evil]" }, localDriverOptions, master)).toThrow("换行");
    expect(() => renderRcloneConfig(ch, { path: "/x", user: "a\rb" }, localDriverOptions, master)).toThrow("换行");
    expect(() => renderRcloneConfig(ch, { path: "/x", "bad key": "v" }, localDriverOptions, master)).toThrow("名称无效");
    expect(() => renderRcloneConfig(ch, { path: "/x", "k=v": "v" }, localDriverOptions, master)).toThrow("名称无效");
    expect(() => renderRcloneConfig(ch, { path: "/x", token: "{not json\n}" }, localDriverOptions, master)).toThrow("JSON");
    const token = { access_token: "at", token_type: "Bearer", refresh_token: "rt", expiry: "2026-11-22T22:59:07.272812656Z" };
    const conf = exportTo(ch, { path: "/x", token: JSON.stringify(token, null, 2) }, localDriverOptions);
    const dump = JSON.parse((await rclone(conf, "config", "dump")).text);
    expect(JSON.parse(dump[`kura-${ch.id}`].token)).toEqual(token);
    expect(dump[`kura-${ch.id}`].token).not.toContain("\n");
  });

  test("obscuring follows rclone's IsPassword metadata, never twice", async () => {
    // The table must match what this rclone says about its own options.
    const providers = JSON.parse((await rclone(join(work, "none.conf"), "config", "providers")).text) as {
      Name: string;
      Options: { Name: string; IsPassword: boolean }[];
    }[];
    const fromRclone: Record<string, string[]> = {};
    for (const backend of providers) {
      const names = [...new Set(backend.Options.filter((o) => o.IsPassword).map((o) => o.Name))].sort();
      if (names.length > 0) fromRclone[backend.Name] = names;
    }
    const ours = Object.fromEntries(Object.entries(RCLONE_OBSCURED_OPTIONS).map(([k, v]) => [k, [...v].sort()]));
    expect(ours).toEqual(fromRclone);

    // webdav stores `pass` obscured already: exported as is. sftp `key_file_pass` declared plain by its spec: obscured once.
    const webdavSpec: DriverOptionSpec[] = [
      { key: "url", type: "text", required: true, sensitive: false },
      { key: "pass", type: "password", required: false, sensitive: true },
    ];
    const wd = channel("webdav", false);
    const wdConf = exportTo(wd, { url: "http://127.0.0.1:1/", pass: obscure("-dash secret") }, webdavSpec);
    const wdDump = JSON.parse((await rclone(wdConf, "config", "dump")).text);
    expect((await rclone(wdConf, "reveal", "--", wdDump[`kura-${wd.id}`].pass)).text.trim()).toBe("-dash secret");

    const sftpSpec = [{ key: "key_file_pass", type: "password", required: false, sensitive: true, storedObscured: false }] as const;
    const sf = channel("sftp", false);
    const sfConf = exportTo(sf, { host: "h", key_file_pass: "plain pw" }, sftpSpec as unknown as DriverOptionSpec[]);
    const sfDump = JSON.parse((await rclone(sfConf, "config", "dump")).text);
    expect((await rclone(sfConf, "reveal", "--", sfDump[`kura-${sf.id}`].key_file_pass)).text.trim()).toBe("plain pw");

    // s3's secret is a "password" field in Kura's UI but plain text for rclone.
    const s3ch = channel("s3", false);
    const s3Conf = exportTo(s3ch, { path: "b", secret_access_key: "se/cr+et", access_key_id: "AK", endpoint: "http://x" }, s3DriverOptions);
    expect(JSON.parse((await rclone(s3Conf, "config", "dump")).text)[`kura-${s3ch.id}`].secret_access_key).toBe("se/cr+et");
  });
});

describe("local channel", () => {
  test("plain: rclone reads what Kura wrote through kura-<id>:<path>", async () => {
    const dir = join(work, "plain-local");
    mkdirSync(dir); // as setting the channel up makes it
    const objects = sampleObjects();
    await writeAll(createLocalDriver({ path: dir }), objects);
    const ch = channel("local", false);
    const conf = exportTo(ch, { path: dir }, localDriverOptions);
    await expectRcloneReads(conf, `kura-${ch.id}:${dir}/`, objects);
  });

  test("encrypted: rclone lists plaintext names and reads bytes through kura-<id>-crypt; the disk holds only ciphertext", async () => {
    const dir = join(work, "enc-local");
    mkdirSync(dir); // as setting the channel up makes it
    const ch = channel("local", true);
    const layer = wrapEncrypted(createLocalDriver({ path: dir }), cryptPasswords(master, ch.id, ch.created_at));
    const objects = sampleObjects();
    await writeAll(layer, objects);
    const conf = exportTo(ch, { path: dir }, localDriverOptions);
    await expectRcloneReads(conf, `kura-${ch.id}-crypt:`, objects);

    // rclone's own name encryption maps each key to the file the layer wrote.
    const onDisk = filesUnder(dir);
    const encoded = await Promise.all(Object.keys(objects).map(async (k) => (await rclone(conf, "backend", "encode", `kura-${ch.id}-crypt:`, k)).text.trim()));
    expect(encoded.sort()).toEqual(onDisk);
    // The raw remote shows no plaintext segment.
    expectNoPlainSegments((await rclone(conf, "lsf", "-R", `kura-${ch.id}:${dir}`)).text, objects);

    // cryptcheck compares rclone's checksums of the plaintext tree with the encrypted one.
    const plainDir = join(work, "enc-local-plain");
    for (const [key, bytes] of Object.entries(objects)) {
      mkdirSync(dirname(join(plainDir, key)), { recursive: true });
      writeFileSync(join(plainDir, key), bytes);
    }
    await rclone(conf, "cryptcheck", plainDir, `kura-${ch.id}-crypt:`);
  });

  test("encrypted, reverse: Kura reads what rclone copied into kura-<id>-crypt", async () => {
    const dir = join(work, "enc-local-rev");
    const ch = channel("local", true);
    const conf = exportTo(ch, { path: dir }, localDriverOptions);
    const bytes = new Uint8Array(randomBytes(3 * 65_536 + 123));
    const source = join(work, "from-rclone.png");
    writeFileSync(source, bytes);
    await rclone(conf, "copyto", source, `kura-${ch.id}-crypt:img/zz/yy/from-rclone.png`);

    const layer = wrapEncrypted(createLocalDriver({ path: dir }), cryptPasswords(master, ch.id, ch.created_at));
    expect(filesUnder(dir).join("\n")).not.toContain("from-rclone");
    const keys: string[] = [];
    for await (const info of layer.list("img/")) keys.push(`${info.key}:${info.size}`);
    expect(keys).toEqual([`img/zz/yy/from-rclone.png:${bytes.byteLength}`]);
    expect(sha256(await readAll((await layer.get("img/zz/yy/from-rclone.png")).stream))).toBe(sha256(bytes));
    const start = 2 * 65_536 - 7;
    const part = await layer.get("img/zz/yy/from-rclone.png", { start, end: start + 99 });
    expect(sha256(await readAll(part.stream))).toBe(sha256(bytes.subarray(start, start + 100)));
  });
});

describe("S3 channel (s3rver)", () => {
  const s3Config = (path: string) => ({
    path,
    provider: "Other",
    access_key_id: TEST_CREDENTIALS.accessKeyId,
    secret_access_key: TEST_CREDENTIALS.secretAccessKey,
    endpoint: s3.endpoint,
  });

  test("plain: rclone reads through the exported s3 remote; path style comes from the file", async () => {
    const objects = sampleObjects();
    await writeAll(createS3Driver(s3Config("kura-export/plain")), objects);
    const ch = channel("s3", false);
    const conf = exportTo(ch, s3Config("kura-export/plain"), s3DriverOptions);
    const dump = JSON.parse((await rclone(conf, "config", "dump")).text)[`kura-${ch.id}`];
    expect(dump.force_path_style).toBe("true");
    expect(dump.secret_access_key).toBe(TEST_CREDENTIALS.secretAccessKey);
    const before = s3.verified.length;
    await expectRcloneReads(conf, `kura-${ch.id}:kura-export/plain/`, objects);
    // rclone really talked to s3rver with signatures made from the exported keys, path-style.
    const seen = s3.verified.slice(before);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((r) => r.url.startsWith("/kura-export"))).toBe(true);
  });

  test("encrypted: rclone reads Kura's objects through kura-<id>-crypt, Kura reads rclone's", async () => {
    const ch = channel("s3", true);
    const passwords = cryptPasswords(master, ch.id, ch.created_at);
    const layer = wrapEncrypted(createS3Driver(s3Config("kura-export/enc")), passwords);
    const objects = sampleObjects();
    await writeAll(layer, objects);
    const conf = exportTo(ch, s3Config("kura-export/enc"), s3DriverOptions);
    await expectRcloneReads(conf, `kura-${ch.id}-crypt:`, objects);
    expectNoPlainSegments((await rclone(conf, "lsf", "-R", `kura-${ch.id}:kura-export/enc`)).text, objects);

    const bytes = new Uint8Array(randomBytes(70_000));
    const source = join(work, "s3-from-rclone.bin");
    writeFileSync(source, bytes);
    await rclone(conf, "copyto", source, `kura-${ch.id}-crypt:_kura/backups/kura-20260102-000000.000.db`);
    const got = await layer.get("_kura/backups/kura-20260102-000000.000.db");
    expect(got.totalSize).toBe(bytes.byteLength);
    expect(sha256(await readAll(got.stream))).toBe(sha256(bytes));
    const tail = await layer.get("_kura/backups/kura-20260102-000000.000.db", { start: 65_530 });
    expect(sha256(await readAll(tail.stream))).toBe(sha256(bytes.subarray(65_530)));
  });
});
