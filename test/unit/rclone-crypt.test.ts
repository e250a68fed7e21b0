/**
 * rclone crypt (keys, names, file data, ranged reads) against vectors written
 * by real rclone v1.60.1 in /work/shared/rclone/vectors.
 */
import { SHARED_DIR } from "../helpers/shared";
import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { makeCrypt } from "../../src/channels/rclone/crypt.ts";
import { deriveCryptKeys } from "../../src/channels/rclone/crypt-keys.ts";
import { decryptSegment, encryptSegment } from "../../src/channels/rclone/crypt-names.ts";
import {
  BLOCK_CIPHER_SIZE,
  BLOCK_DATA_SIZE,
  CryptRangeError,
  HEADER_SIZE,
  addToNonce,
  decryptBuffer,
  encryptBuffer,
} from "../../src/channels/rclone/crypt-data.ts";

const VECTORS = join(SHARED_DIR, "rclone/vectors");
const FILES = `${VECTORS}/crypt-files`;

interface NameSet {
  remote: string;
  config: { filename_encryption: string; directory_name_encryption?: boolean; password_plain: string; password2_plain: string };
  derived_keys_hex?: { data_key: string; name_key: string; name_tweak: string };
  names: { plain: string; encrypted: string }[];
}
interface NameVectors {
  sets: NameSet[];
  edge_cases: { encode: { plain: string; encrypted: string }[]; decode: { input: string; result?: string; error?: string }[] };
}
interface FileVector {
  plain_path: string;
  plain_file: string;
  plain_size: number;
  plain_sha256: string;
  encrypted_path: string;
  cipher_file: string;
  cipher_size: number;
  cipher_nonce_hex: string;
  fixed_nonce: { cipher_file: string; nonce_hex: string; block_nonces_hex: string[]; cipher_sha256: string };
}

const names: NameVectors = JSON.parse(readFileSync(`${VECTORS}/crypt-names.json`, "utf8"));
const manifest: { files: FileVector[] } = JSON.parse(readFileSync(`${FILES}/manifest.json`, "utf8"));
const crypt = makeCrypt("kura-vector-password", "kura-vector-salt");
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** A source stream delivering `bytes` in chunks of `chunk` bytes (odd sizes exercise re-blocking). */
function streamOf(bytes: Uint8Array, chunk = 4096): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
}
async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

describe("key derivation", () => {
  test.each(names.sets.filter((s) => s.derived_keys_hex).map((s) => [s.remote, s] as const))("%s keys match", (_, set) => {
    const keys = deriveCryptKeys(set.config.password_plain, set.config.password2_plain);
    expect(hex(keys.dataKey)).toBe(set.derived_keys_hex!.data_key);
    expect(hex(keys.nameKey)).toBe(set.derived_keys_hex!.name_key);
    expect(hex(keys.nameTweak)).toBe(set.derived_keys_hex!.name_tweak);
  });

  test("refuses an empty password (rclone would use all-zero keys)", () => {
    expect(() => deriveCryptKeys("", "salt")).toThrow(/密码不能为空/);
  });
});

describe("file names (filename_encryption = standard)", () => {
  const standard = names.sets.filter((s) => s.config.filename_encryption === "standard");
  test("vectors cover several configurations", () => expect(standard.length).toBeGreaterThanOrEqual(4));

  test.each(standard.map((s) => [s.remote, s] as const))("%s: every name encrypts and decrypts as rclone", (_, set) => {
    const c = makeCrypt(set.config.password_plain, set.config.password2_plain, {
      directoryNameEncryption: set.config.directory_name_encryption,
    });
    expect(set.names.length).toBeGreaterThan(0);
    for (const { plain, encrypted } of set.names) {
      expect(c.encryptPath(plain)).toBe(encrypted);
      expect(c.decryptPath(encrypted)).toBe(plain);
    }
  });

  test.each(names.edge_cases.encode.map((e) => [e.plain, e.encrypted] as const))("edge path %p → %p", (plain, encrypted) => {
    expect(crypt.encryptPath(plain)).toBe(encrypted);
    expect(crypt.decryptPath(encrypted)).toBe(plain);
  });

  test.each(names.edge_cases.decode.map((e) => [e.input, e] as const))("decoding %p behaves like rclone", (input, edge) => {
    if (edge.result !== undefined) expect(decryptSegment(crypt.keys, input)).toBe(edge.result);
    else expect(() => decryptSegment(crypt.keys, input)).toThrow();
  });

  test("segment lengths follow rclone's rule (16-byte PKCS#7 blocks, base32)", () => {
    for (const n of [1, 15, 16, 31, 32, 47, 143, 144, 200]) {
      const enc = encryptSegment(crypt.keys, "x".repeat(n));
      expect(enc.length).toBe(Math.ceil((8 * 16 * (Math.floor(n / 16) + 1)) / 5));
      expect(enc).toMatch(/^[0-9a-v]+$/);
      expect(decryptSegment(crypt.keys, enc)).toBe("x".repeat(n));
    }
  });

  test("a name from another key set does not decrypt", () => {
    const other = makeCrypt("another-password", "kura-vector-salt");
    expect(() => crypt.decryptPath(other.encryptPath("hello.jpg"))).toThrow();
  });
});

describe("file data vectors", () => {
  test.each(manifest.files.map((f) => [f.plain_path, f] as const))("%s", async (_, f) => {
    const plain = readFileSync(`${FILES}/${f.plain_file}`);
    const rcloneCipher = readFileSync(`${FILES}/${f.cipher_file}`);
    const fixed = readFileSync(`${FILES}/${f.fixed_nonce.cipher_file}`);
    expect(sha256(plain)).toBe(f.plain_sha256);
    expect(crypt.encryptPath(f.plain_path)).toBe(f.encrypted_path);
    expect(crypt.encryptedSize(f.plain_size)).toBe(f.cipher_size);
    expect(crypt.decryptedSize(f.cipher_size)).toBe(f.plain_size);
    expect(hex(rcloneCipher.subarray(8, 32))).toBe(f.cipher_nonce_hex);

    // Decrypt what rclone wrote: whole buffer and streamed with awkward chunk sizes.
    expect(sha256(decryptBuffer(rcloneCipher, crypt.keys))).toBe(f.plain_sha256);
    expect(sha256(await collect(crypt.decryptStream(streamOf(rcloneCipher, 7777))))).toBe(f.plain_sha256);
    expect(sha256(await collect(crypt.decryptStream(streamOf(fixed, 65552 + 3))))).toBe(f.plain_sha256);

    // Re-encrypt with the vector nonce: byte-for-byte equal to the file rclone reads back.
    const nonce = Buffer.from(f.fixed_nonce.nonce_hex, "hex");
    expect(sha256(encryptBuffer(plain, crypt.keys, nonce))).toBe(f.fixed_nonce.cipher_sha256);
    const streamed = await collect(crypt.encryptStream(streamOf(plain, 1000), nonce));
    expect(Buffer.compare(streamed, fixed)).toBe(0);
    for (const [i, n] of f.fixed_nonce.block_nonces_hex.entries()) expect(hex(addToNonce(nonce, i))).toBe(n);
  });
});

describe("sizes", () => {
  test.each([
    [0, 32],
    [1, 49],
    [65535, 65583],
    [65536, 65584],
    [65537, 65601],
    [200000, 200096],
    [165, 213],
    [331, 379],
  ])("plain %d ↔ cipher %d", (plain, cipher) => {
    expect(crypt.encryptedSize(plain)).toBe(cipher);
    expect(crypt.decryptedSize(cipher)).toBe(plain);
  });

  test("sizes rclone can never write are rejected", () => {
    for (const bad of [0, 31, 33, 48, HEADER_SIZE + BLOCK_CIPHER_SIZE + 16]) expect(() => crypt.decryptedSize(bad)).toThrow();
  });
});

describe("round trips at block boundaries", () => {
  test.each([0, 1, 65535, 65536, 65537, 200000])("%d bytes", async (size) => {
    const plain = randomBytes(size);
    const cipher = await collect(crypt.encryptStream(streamOf(plain, 9999)));
    expect(cipher.length).toBe(crypt.encryptedSize(size));
    expect(Buffer.compare(decryptBuffer(cipher, crypt.keys), plain)).toBe(0);
    expect(Buffer.compare(await collect(crypt.decryptStream(streamOf(cipher, 50000))), plain)).toBe(0);
    // Random nonce per object: the same plaintext never encrypts the same twice.
    if (size > 0) expect(Buffer.compare(await collect(crypt.encryptStream(streamOf(plain))), cipher)).not.toBe(0);
  });

  test("the encryptor pulls at most about one block ahead of its consumer", async () => {
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled += 1000;
        c.enqueue(new Uint8Array(1000));
      },
    });
    const reader = crypt.encryptStream(endless).getReader();
    expect((await reader.read()).value!.length).toBe(HEADER_SIZE);
    expect((await reader.read()).value!.length).toBe(BLOCK_CIPHER_SIZE);
    expect(pulled).toBeLessThanOrEqual(65536 + 3000);
    await reader.cancel();
  });
});

describe("ranged reads", () => {
  const vector = manifest.files.find((f) => f.plain_size === 200000)!;
  const plain = readFileSync(`${FILES}/${vector.plain_file}`);
  const cipher = readFileSync(`${FILES}/${vector.cipher_file}`); // written by rclone, random nonce

  async function readRange(start: number, end?: number) {
    const fetched: { start: number; end: number }[] = [];
    const fetch = async (r: { start: number; end: number }) => {
      fetched.push(r);
      return streamOf(cipher.subarray(r.start, r.end + 1), 5000);
    };
    const { plan, stream } = await crypt.readPlainRange(fetch, { start, end }, cipher.length);
    return { plan, fetched, bytes: await collect(stream) };
  }

  test.each([
    [0, 0],
    [0, 65535],
    [65535, 65536],
    [65530, 131080],
    [131072, 131072],
    [131071, 199999],
    [199999, 199999],
    [100000, undefined],
    [0, undefined],
    [150000, 999999],
  ])("bytes=%p-%p", async (start, end) => {
    const { plan, fetched, bytes } = await readRange(start, end);
    const last = Math.min(end ?? plain.length - 1, plain.length - 1);
    expect(Buffer.compare(bytes, plain.subarray(start, last + 1))).toBe(0);
    expect(plan.length).toBe(last - start + 1);
    // Only the header and the covering blocks are fetched.
    const blocks = Math.floor(last / 65536) - Math.floor(start / 65536) + 1;
    const fetchedBytes = fetched.reduce((n, r) => n + r.end - r.start + 1, 0);
    expect(fetchedBytes).toBeLessThanOrEqual(HEADER_SIZE + blocks * BLOCK_CIPHER_SIZE);
    expect(fetched.every((r) => r.start >= 0 && r.end < cipher.length)).toBe(true);
  });

  test("a range inside block 2 fetches the header and block 2 only", async () => {
    const { fetched, bytes } = await readRange(140000, 140009);
    expect(fetched).toEqual([
      { start: 0, end: HEADER_SIZE - 1 },
      { start: HEADER_SIZE + 2 * BLOCK_CIPHER_SIZE, end: HEADER_SIZE + 3 * BLOCK_CIPHER_SIZE - 1 },
    ]);
    expect(Buffer.compare(bytes, plain.subarray(140000, 140010))).toBe(0);
  });

  test("a range inside block 0 needs a single fetch", async () => {
    const { fetched } = await readRange(10, 20);
    expect(fetched).toEqual([{ start: 0, end: HEADER_SIZE + BLOCK_CIPHER_SIZE - 1 }]);
  });

  test("unsatisfiable ranges are rejected", () => {
    expect(() => crypt.cipherRangeFor({ start: 200000 }, cipher.length)).toThrow(CryptRangeError);
    expect(() => crypt.cipherRangeFor({ start: 10, end: 5 }, cipher.length)).toThrow(CryptRangeError);
    expect(() => crypt.cipherRangeFor({ start: 0 }, HEADER_SIZE)).toThrow(CryptRangeError);
  });
});

describe("tampering and wrong keys", () => {
  const f = manifest.files.find((v) => v.plain_size === 65537)!;
  const cipher = readFileSync(`${FILES}/${f.cipher_file}`);
  const flip = (at: number) => {
    const copy = Uint8Array.from(cipher);
    copy[at] ^= 0x01;
    return copy;
  };
  const cases: [string, Uint8Array, RegExp][] = [
    ["bad magic", flip(0), /文件头错误/],
    ["nonce changed", flip(10), /校验失败/],
    ["tag changed", flip(HEADER_SIZE + 3), /校验失败/],
    ["data in block 1 changed", flip(HEADER_SIZE + BLOCK_CIPHER_SIZE + 16), /校验失败/],
    ["truncated inside the last tag", cipher.subarray(0, HEADER_SIZE + BLOCK_CIPHER_SIZE + 10), /截断|大小无效/],
    ["shorter than a header", cipher.subarray(0, 20), /过短/],
  ];

  test.each(cases)("%s is rejected (buffer and stream)", async (_, bad, message) => {
    expect(() => decryptBuffer(bad, crypt.keys)).toThrow(message);
    await expect(collect(crypt.decryptStream(streamOf(bad, 10000)))).rejects.toThrow(message);
  });

  test("a different password cannot read the data", async () => {
    const other = makeCrypt("kura-vector-password", "other-salt");
    expect(() => decryptBuffer(cipher, other.keys)).toThrow(/校验失败/);
    await expect(collect(other.decryptStream(streamOf(cipher)))).rejects.toThrow(/校验失败/);
  });

  test("a tampered block inside a requested range is rejected", async () => {
    const bad = flip(HEADER_SIZE + BLOCK_CIPHER_SIZE + 16);
    const fetch = async (r: { start: number; end: number }) => streamOf(bad.subarray(r.start, r.end + 1));
    const { stream } = await crypt.readPlainRange(fetch, { start: 65536 }, bad.length);
    await expect(collect(stream)).rejects.toThrow(/校验失败/);
  });
});

describe("format edges", () => {
  const plainOf = (n: number) => new Uint8Array(randomBytes(n));
  const cat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));
  const header = cat(Buffer.from("RCLONE\0\0", "latin1"), new Uint8Array(24));
  /** A source that counts the bytes it hands out and the reason it was cancelled with; it pulls only on demand. */
  function watchedSource(bytes: Uint8Array | null, chunk = 1000) {
    const seen = { pulled: 0, cancelled: undefined as unknown };
    let at = 0;
    const stream = new ReadableStream<Uint8Array>(
      {
        pull(c) {
          if (bytes && at >= bytes.length) return c.close();
          const piece = bytes ? bytes.slice(at, at + chunk) : new Uint8Array(chunk);
          at += piece.length;
          seen.pulled += piece.length;
          c.enqueue(piece);
        },
        cancel(reason) {
          seen.cancelled = reason;
        },
      },
      { highWaterMark: 0 },
    );
    return { stream, seen };
  }

  test("sizes that are not whole non-negative numbers are refused in the size's own words", () => {
    for (const bad of [-1, 0.5, Number.NaN, 2 ** 53]) expect(() => crypt.encryptedSize(bad)).toThrow(/明文大小无效/);
    for (const bad of [31, 32.5, Number.NaN]) expect(() => crypt.decryptedSize(bad)).toThrow(/过短/);
  });

  test("block nonces add as one 24-byte little-endian number, carrying across bytes and wrapping at 2^192", () => {
    const zero = new Uint8Array(24);
    expect(hex(addToNonce(zero, 0x010203))).toBe(`030201${"00".repeat(21)}`);
    expect(hex(addToNonce(zero, 2 ** 53 - 1))).toBe(`${"ff".repeat(6)}1f${"00".repeat(17)}`);
    expect(hex(addToNonce(Uint8Array.from([0xff, 0xff, 0x07, ...new Uint8Array(21)]), 1))).toBe(`000008${"00".repeat(21)}`);
    expect(hex(addToNonce(new Uint8Array(24).fill(0xff), 1))).toBe("00".repeat(24));
    expect(hex(addToNonce(new Uint8Array(24).fill(0xff), 258))).toBe(`0101${"00".repeat(22)}`);
  });

  test("a nonce that is not 24 bytes is refused before anything is written", () => {
    for (const n of [0, 23, 25]) {
      expect(() => encryptBuffer(plainOf(10), crypt.keys, new Uint8Array(n))).toThrow(/24 字节/);
      expect(() => crypt.encryptStream(streamOf(plainOf(10)), new Uint8Array(n))).toThrow(/24 字节/);
    }
  });

  test("a block of a bare 16-byte tag is truncated data, one of 17 bytes is checked by its tag", async () => {
    await expect(collect(crypt.decryptStream(streamOf(cat(header, new Uint8Array(16)))))).rejects.toThrow(/截断/);
    await expect(collect(crypt.decryptStream(streamOf(cat(header, new Uint8Array(17)))))).rejects.toThrow(/校验失败/);
    // A 17-byte block rclone wrote (1 byte of plaintext) reads back.
    const one = encryptBuffer(Uint8Array.of(42), crypt.keys);
    expect(Array.from(await collect(crypt.decryptStream(streamOf(one))))).toEqual([42]);
  });

  test("the encryptor reads no plaintext until its consumer asks for a block, and reads one block per ask", async () => {
    const { stream, seen } = watchedSource(null, 4096);
    const reader = crypt.encryptStream(stream).getReader();
    await Bun.sleep(20);
    expect(seen.pulled).toBe(0);
    expect((await reader.read()).value!.length).toBe(HEADER_SIZE);
    await Bun.sleep(20);
    expect(seen.pulled).toBe(0); // the header needs no plaintext
    expect((await reader.read()).value!.length).toBe(BLOCK_CIPHER_SIZE);
    await Bun.sleep(20);
    expect(seen.pulled).toBe(BLOCK_DATA_SIZE);
    await reader.cancel("consumer gone");
    expect(seen.cancelled).toBe("consumer gone");
  });

  test("the decryptor reads no ciphertext until its consumer asks, and passes a cancel on to its source", async () => {
    const cipher = encryptBuffer(plainOf(3 * BLOCK_DATA_SIZE), crypt.keys);
    const { stream, seen } = watchedSource(cipher, 4096);
    const reader = crypt.decryptStream(stream).getReader();
    await Bun.sleep(20);
    expect(seen.pulled).toBe(0);
    expect((await reader.read()).value!.length).toBe(BLOCK_DATA_SIZE);
    await Bun.sleep(20);
    expect(seen.pulled).toBeLessThan(HEADER_SIZE + BLOCK_CIPHER_SIZE + 4096);
    await reader.cancel("client went away");
    expect(seen.cancelled).toBe("client went away");
  });

  test("ranges that do not start at a whole byte inside the object are unsatisfiable", () => {
    const size = crypt.encryptedSize(200000);
    for (const start of [-1, 0.5, Number.NaN, 200000, 2 ** 53]) {
      const err = (() => {
        try {
          crypt.cipherRangeFor({ start }, size);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(CryptRangeError);
      expect((err as Error).name).toBe("CryptRangeError");
      expect((err as Error).message).toMatch(/无法满足/);
    }
    expect(crypt.cipherRangeFor({ start: 199999 }, size)).toMatchObject({ plainStart: 199999, plainEnd: 199999, length: 1, firstBlock: 3 });
  });

  /** The blocks of `object` from block `first` on, decrypted by a plan made for an object of `planned` plaintext bytes. */
  async function readWithStalePlan(object: Uint8Array, planned: number, first: number) {
    const cipher = encryptBuffer(object, crypt.keys);
    const plan = crypt.cipherRangeFor({ start: first * BLOCK_DATA_SIZE }, crypt.encryptedSize(planned));
    const blocks = cipher.subarray(HEADER_SIZE + first * BLOCK_CIPHER_SIZE);
    return collect(crypt.decryptRange(cipher.subarray(0, HEADER_SIZE), streamOf(blocks, 5000), plan));
  }

  test("blocks that end before the planned range does (the object shrank after its size was read) fail as truncated", async () => {
    // The object ends on a block boundary: the next block is simply missing.
    await expect(readWithStalePlan(plainOf(2 * BLOCK_DATA_SIZE), 200000, 1)).rejects.toThrow(/截断/);
    // The object ends inside a block that authenticates: still short of the plan.
    await expect(readWithStalePlan(plainOf(BLOCK_DATA_SIZE + 1000), 200000, 1)).rejects.toThrow(/截断/);
    // The same blocks under a plan that fits them read back whole.
    const object = plainOf(BLOCK_DATA_SIZE + 1000);
    const cipher = encryptBuffer(object, crypt.keys);
    const plan = crypt.cipherRangeFor({ start: BLOCK_DATA_SIZE }, cipher.length);
    const back = await collect(crypt.decryptRange(cipher.subarray(0, HEADER_SIZE), streamOf(cipher.subarray(plan.cipherStart)), plan));
    expect(Buffer.compare(back, object.subarray(BLOCK_DATA_SIZE))).toBe(0);
  });

  test("a range that ends exactly on a 64 KiB boundary neither reads nor checks the block after it", async () => {
    const object = plainOf(3 * BLOCK_DATA_SIZE);
    const cipher = encryptBuffer(object, crypt.keys);
    const damaged = Uint8Array.from(cipher);
    damaged[HEADER_SIZE + 2 * BLOCK_CIPHER_SIZE + 20] ^= 1; // inside block 2
    const plan = crypt.cipherRangeFor({ start: 10, end: 2 * BLOCK_DATA_SIZE - 1 }, cipher.length);
    const { stream, seen } = watchedSource(damaged.subarray(HEADER_SIZE), 4096);
    const back = await collect(crypt.decryptRange(cipher.subarray(0, HEADER_SIZE), stream, plan));
    expect(Buffer.compare(back, object.subarray(10, 2 * BLOCK_DATA_SIZE))).toBe(0);
    expect(seen.pulled).toBeLessThan(2 * BLOCK_CIPHER_SIZE + 4096);
  });
});
