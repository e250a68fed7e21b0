/**
 * Interop with the REAL rclone binary (Debian package `rclone`, v1.60.1):
 * what Kura encrypts, rclone must read; what rclone writes, Kura must read.
 * Never skipped: a missing rclone fails every test with a clear message.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { makeCrypt, obscure, reveal, type Crypt } from "../../src/channels/rclone/crypt.ts";
import { decryptBuffer } from "../../src/channels/rclone/crypt-data.ts";

const RCLONE = Bun.which("rclone");
const MISSING = "未找到 rclone 可执行文件：互操作测试需要真实的 rclone（Debian: apt-get install -y rclone），不能跳过";

// Random per run, with spaces and non-ASCII so UTF-8 handling of passwords is exercised too.
const PASSWORD = `密码 ${randomBytes(12).toString("hex")} pässwörd`;
const SALT = `盐 ${randomBytes(12).toString("hex")}`;
const crypt: Crypt = makeCrypt(PASSWORD, SALT);
const noSalt: Crypt = makeCrypt(PASSWORD, "");

let work = "";
let conf = "";
const storeDir = () => join(work, "store");
const noSaltDir = () => join(work, "store-nosalt");

interface RcloneResult {
  stdout: Uint8Array;
  text: string;
  stderr: string;
}

async function rclone(...args: string[]): Promise<RcloneResult> {
  if (!RCLONE) throw new Error(MISSING);
  const env: Record<string, string> = { ...process.env, XDG_CACHE_HOME: join(work, "cache") } as Record<string, string>;
  delete env.AWS_CA_BUNDLE; // breaks rclone 1.60 on this machine (see helper notes)
  const proc = Bun.spawn([RCLONE, "--config", conf, ...args], { env, stdout: "pipe", stderr: "pipe", cwd: work });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`rclone ${args[0]} 退出码 ${code}: ${stderr}`);
  const bytes = new Uint8Array(stdout);
  return { stdout: bytes, text: new TextDecoder().decode(bytes), stderr };
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const lines = (s: string) => s.split("\n").filter((l) => l.length > 0);

/** Every file under `dir`, as '/'-separated paths relative to it. */
function walk(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((p) => statSync(join(dir, p)).isFile())
    .map((p) => p.split("\\").join("/"));
}

/** Plaintexts Kura writes: block-boundary sizes, nested dirs, UTF-8 and spaces in names, the longest name ext4 allows. */
const OURS: { path: string; data: Uint8Array }[] = [
  { path: "empty.bin", data: new Uint8Array(0) },
  { path: "one.bin", data: randomBytes(1) },
  { path: "ab/cd/block-minus-1.jpg", data: randomBytes(65535) },
  { path: "ab/cd/block.jpg", data: randomBytes(65536) },
  { path: "2025/01/图片 1 (block+1).png", data: randomBytes(65537) },
  { path: "_kura/backups/kura-20250101-120000.000.db", data: randomBytes(200000) },
  { path: `long/${"x".repeat(139)}.png`, data: randomBytes(10) },
];

async function writeEncrypted(c: Crypt, root: string, path: string, data: Uint8Array): Promise<void> {
  const dest = join(root, c.encryptPath(path));
  mkdirSync(dirname(dest), { recursive: true });
  const plain = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(data);
      c.close();
    },
  });
  await Bun.write(dest, new Response(c.encryptStream(plain)));
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "kura-rclone-interop-"));
  conf = join(work, "rclone.conf");
  mkdirSync(storeDir());
  mkdirSync(noSaltDir());
  writeFileSync(
    conf,
    [
      "# written by Kura's interop test",
      "[kura-t]",
      "type = local",
      "",
      "[kura-t-crypt]",
      "type = crypt",
      `remote = kura-t:${storeDir()}`,
      "filename_encryption = standard",
      "directory_name_encryption = true",
      `password = ${obscure(PASSWORD)}`,
      `password2 = ${obscure(SALT)}`,
      "",
      "[kura-t-nosalt-crypt]",
      "type = crypt",
      `remote = kura-t:${noSaltDir()}`,
      "filename_encryption = standard",
      `password = ${obscure(PASSWORD)}`,
      "",
    ].join("\n"),
  );
  for (const f of OURS) await writeEncrypted(crypt, storeDir(), f.path, f.data);
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("real rclone is present", () => {
  test("rclone binary is installed", async () => {
    expect(RCLONE, MISSING).not.toBeNull();
    expect((await rclone("version")).text).toMatch(/^rclone v1\./);
  });
});

describe("obscure interop", () => {
  test("rclone reveals what we obscure", async () => {
    // "--": about 1 in 64 obscured values starts with '-', which rclone would parse as a flag.
    for (const plain of [PASSWORD, SALT, "p@ss w0rd!#;=\"'`\\/", ""]) {
      expect((await rclone("reveal", "--", obscure(plain))).text.replace(/\n$/, "")).toBe(plain);
    }
  });

  test("we reveal what rclone obscures", async () => {
    const out = (await rclone("obscure", "--", PASSWORD)).text.trim();
    expect(reveal(out)).toBe(PASSWORD);
  });
});

describe("Kura writes, rclone reads", () => {
  test("rclone lists our encrypted names and plaintext sizes", async () => {
    const listed = lines((await rclone("lsf", "-R", "--files-only", "--format", "ps", "--separator", "|", "kura-t-crypt:")).text);
    expect(listed.sort()).toEqual(OURS.map((f) => `${f.path}|${f.data.length}`).sort());
  });

  test("rclone lsf -R shows our directory names decrypted", async () => {
    const dirs = lines((await rclone("lsf", "-R", "--dirs-only", "kura-t-crypt:")).text);
    expect(dirs.sort()).toEqual(["2025/", "2025/01/", "_kura/", "_kura/backups/", "ab/", "ab/cd/", "long/"].sort());
  });

  test.each(OURS.map((f) => [f.path, f] as const))("rclone cat %s returns our plaintext", async (_, f) => {
    const out = await rclone("cat", `kura-t-crypt:${f.path}`);
    expect(out.stdout.length).toBe(f.data.length);
    expect(sha256(out.stdout)).toBe(sha256(f.data));
  });

  test("rclone cryptcheck finds no differences", async () => {
    const plainDir = join(work, "plain-ours");
    for (const f of OURS) {
      mkdirSync(dirname(join(plainDir, f.path)), { recursive: true });
      writeFileSync(join(plainDir, f.path), f.data);
    }
    // Exit code 0 already means no differences; also check it really compared our files.
    const res = await rclone("cryptcheck", plainDir, "kura-t-crypt:");
    expect(res.stderr).toContain("0 differences found");
    expect(res.stderr).toContain(`${OURS.length} matching files`);
  });

  test("rclone backend encode/decode agree with our names", async () => {
    const paths = OURS.map((f) => f.path);
    const encoded = lines((await rclone("backend", "encode", "kura-t-crypt:", ...paths)).text);
    expect(encoded).toEqual(paths.map((p) => crypt.encryptPath(p)));
    const decoded = lines((await rclone("backend", "decode", "kura-t-crypt:", ...encoded)).text);
    expect(decoded).toEqual(paths);
  });

  test("default salt (no password2): rclone reads what we wrote", async () => {
    const data = randomBytes(70000);
    await writeEncrypted(noSalt, noSaltDir(), "salt/默认.bin", data);
    expect(lines((await rclone("lsf", "-R", "--files-only", "kura-t-nosalt-crypt:")).text)).toEqual(["salt/默认.bin"]);
    expect(sha256((await rclone("cat", "kura-t-nosalt-crypt:salt/默认.bin")).stdout)).toBe(sha256(data));
  });
});

describe("rclone writes, Kura reads", () => {
  const files = [
    { path: "rev/猫咪 照片.jpg", data: randomBytes(200000) },
    { path: "rev/empty", data: new Uint8Array(0) },
    { path: "rev/deep/a b/65536.bin", data: randomBytes(65536) },
  ];

  beforeAll(async () => {
    for (const [i, f] of files.entries()) {
      const src = join(work, `src-${i}`);
      writeFileSync(src, f.data);
      await rclone("copyto", src, `kura-t-crypt:${f.path}`);
    }
  });

  test.each(files.map((f) => [f.path, f] as const))("we decrypt rclone's %s (name and data)", async (_, f) => {
    const onDisk = join(storeDir(), crypt.encryptPath(f.path));
    const cipher = readFileSync(onDisk);
    expect(cipher.length).toBe(crypt.encryptedSize(f.data.length));
    expect(sha256(decryptBuffer(cipher, crypt.keys))).toBe(sha256(f.data));
    const streamed = new Uint8Array(await new Response(crypt.decryptStream(Bun.file(onDisk).stream())).arrayBuffer());
    expect(sha256(streamed)).toBe(sha256(f.data));
  });

  test("every name rclone wrote decrypts with our key", () => {
    const ours = new Set(OURS.map((f) => f.path));
    const theirs = walk(storeDir())
      .map((p) => crypt.decryptPath(p))
      .filter((p) => !ours.has(p));
    expect(theirs.sort()).toEqual(files.map((f) => f.path).sort());
  });

  test("ranged reads of an rclone-written object fetch only what they need", async () => {
    const f = files[0];
    const onDisk = join(storeDir(), crypt.encryptPath(f.path));
    const size = statSync(onDisk).size;
    let fetched = 0;
    const fetch = async (r: { start: number; end: number }) => {
      fetched += r.end - r.start + 1;
      return Bun.file(onDisk)
        .slice(r.start, r.end + 1)
        .stream();
    };
    for (const [start, end] of [
      [65530, 65545],
      [131000, 140000],
      [199990, 199999],
    ]) {
      fetched = 0;
      const { stream } = await crypt.readPlainRange(fetch, { start, end }, size);
      const got = new Uint8Array(await new Response(stream).arrayBuffer());
      expect(Buffer.compare(got, f.data.subarray(start, end + 1))).toBe(0);
      // Exactly the header plus the covering 65 552-byte blocks, nothing more.
      const first = Math.floor(start / 65536);
      const last = Math.floor(end / 65536);
      expect(fetched).toBe(32 + Math.min(size, 32 + (last + 1) * 65552) - (32 + first * 65552));
      expect(fetched).toBeLessThan(size);
    }
  });

  test("default salt (no password2): we read what rclone wrote", async () => {
    const data = randomBytes(1234);
    const src = join(work, "src-nosalt");
    writeFileSync(src, data);
    await rclone("copyto", src, "kura-t-nosalt-crypt:from-rclone/文件.bin");
    const cipher = readFileSync(join(noSaltDir(), noSalt.encryptPath("from-rclone/文件.bin")));
    expect(sha256(decryptBuffer(cipher, noSalt.keys))).toBe(sha256(data));
    expect(walk(noSaltDir()).some((p) => p.includes("from-rclone"))).toBe(false);
  });
});
