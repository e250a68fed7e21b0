/**
 * The encrypted-channel layer over the REAL local driver: behaviour (the shared
 * driver conformance suite), what reaches the disk, which cipher bytes a ranged
 * read fetches, streaming puts, and per-channel keys.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key.ts";
import { cryptPasswords, cryptWrapper, wrapEncrypted, type CryptPasswords } from "../../src/channels/crypt-layer.ts";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult } from "../../src/channels/driver.ts";
import { createLocalDriver } from "../../src/channels/drivers/local.ts";
import type { ChannelRow } from "../../src/channels/repo.ts";
import { makeCrypt } from "../../src/channels/rclone/crypt.ts";
import { BLOCK_CIPHER_SIZE, BLOCK_DATA_SIZE, HEADER_SIZE, decryptBuffer, encryptedSize } from "../../src/channels/rclone/crypt-data.ts";
import { chunkedStream, driverConformance, listKeys, readAll } from "../channels/conformance.ts";

const scratch = await mkdtemp(join(tmpdir(), "kura-crypt-layer-"));
afterAll(() => rm(scratch, { recursive: true, force: true }));

const master = MasterKey.generate().key;
const CREATED = "2026-01-01 00:00:00";
let counter = 0;

function freshDir(): string {
  const dir = join(scratch, `ch-${++counter}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Every file under `dir`, '/'-separated and relative. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((p) => statSync(join(dir, p)).isFile())
    .sort();
}

interface Recorded {
  gets: { key: string; range?: ByteRange; served: number }[];
  puts: { key: string; size: number; streamed: boolean }[];
}

/** Passes everything to `inner`, recording requested ranges and the bytes actually delivered. */
function recording(inner: Driver): { driver: Driver; log: Recorded } {
  const log: Recorded = { gets: [], puts: [] };
  const driver: Driver = {
    kind: inner.kind,
    async put(key, body, size) {
      log.puts.push({ key, size, streamed: body instanceof ReadableStream });
      return inner.put(key, body, size);
    },
    async get(key, range): Promise<GetResult> {
      const got = await inner.get(key, range);
      const entry = { key, range: range && { ...range }, served: 0 };
      log.gets.push(entry);
      const counted = got.stream.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            entry.served += chunk.byteLength;
            controller.enqueue(chunk);
          },
        }),
      );
      return { ...got, stream: counted };
    },
    head: (key) => inner.head(key),
    delete: (key) => inner.delete(key),
    list: (prefix) => inner.list(prefix),
    probe: (deep) => inner.probe(deep),
  };
  return { driver, log };
}

const channelPasswords = (id: number) => cryptPasswords(master, id, CREATED);

driverConformance("crypt layer over local", async () => {
  const dir = freshDir();
  return { driver: wrapEncrypted(createLocalDriver({ path: dir }), channelPasswords(1)), cleanup: async () => {} };
});

describe("crypt layer: what reaches the disk", () => {
  const dir = freshDir();
  const passwords = channelPasswords(2);
  const layer = wrapEncrypted(createLocalDriver({ path: dir }), passwords);
  const marker = new TextEncoder().encode("KURA-PLAINTEXT-MARKER-0123456789");
  const image = new Uint8Array(3 * BLOCK_DATA_SIZE + 777);
  for (let i = 0; i < image.length; i += marker.length) image.set(marker.subarray(0, Math.min(marker.length, image.length - i)), i);
  const sha = randomBytes(32).toString("hex");
  const objects: Record<string, Uint8Array> = {
    [`img/ab/cd/${sha}-x7Kp.jpg`]: image,
    "_kura/backups/kura-20260101-000000.000.db": marker,
    "图片/空 格.png": marker,
  };

  test("only encrypted names and rclone-format content are stored", async () => {
    for (const [key, bytes] of Object.entries(objects)) await layer.put(key, bytes, bytes.byteLength);
    const stored = filesUnder(dir);
    expect(stored.length).toBe(3);
    const plainSegments = new Set(Object.keys(objects).flatMap((k) => k.split("/")));
    const reference = makeCrypt(passwords.password, passwords.password2);
    for (const path of stored) {
      for (const segment of path.split("/")) {
        expect(plainSegments.has(segment)).toBe(false);
        expect(segment).toMatch(/^[0-9a-v]+$/); // rclone's base32hex names
      }
      const plainKey = reference.decryptPath(path);
      const plain = objects[plainKey];
      expect(plain).toBeDefined();
      const cipher = new Uint8Array(readFileSync(join(dir, path)));
      expect(Buffer.from(cipher.subarray(0, 8)).toString("latin1")).toBe("RCLONE\0\0");
      expect(cipher.byteLength).toBe(encryptedSize(plain.byteLength));
      expect(Buffer.from(cipher).indexOf(Buffer.from(marker.subarray(0, 12)))).toBe(-1);
      expect(Buffer.compare(decryptBuffer(cipher, reference.keys), plain)).toBe(0);
    }
    expect(await listKeys(layer, "")).toEqual(Object.keys(objects).sort());
    expect((await layer.head(`img/ab/cd/${sha}-x7Kp.jpg`))?.size).toBe(image.byteLength);
  });

  test("a read never offers the stored file: that is ciphertext, and an answer sent from it would leak it", async () => {
    const key = `img/ab/cd/${sha}-x7Kp.jpg`;
    for (const range of [undefined, { start: 0, end: 99 }, { start: 2 * BLOCK_DATA_SIZE + 5, end: 3 * BLOCK_DATA_SIZE + 100 }]) {
      const got = await layer.get(key, range);
      expect(got.file).toBeUndefined();
      expect(await readAll(got.stream)).toEqual(image.subarray(range?.start ?? 0, (range?.end ?? image.length - 1) + 1));
    }
  });

  test("foreign files that do not decrypt are skipped by list, silently", async () => {
    writeFileSync(join(dir, "readme.txt"), "not ours");
    // Valid base32hex of the right length but made with other keys.
    const other = makeCrypt("someone-else", "other-salt");
    mkdirSync(join(dir, other.encryptPath("img")), { recursive: true });
    writeFileSync(join(dir, other.encryptPath("img/ab")), "x");
    const keys = await listKeys(layer, "");
    expect(keys).toEqual(Object.keys(objects).sort());
    expect(await listKeys(layer, "img/")).toEqual([`img/ab/cd/${sha}-x7Kp.jpg`]);
    expect(await listKeys(layer, "_kura/backups/kura-2026")).toEqual(["_kura/backups/kura-20260101-000000.000.db"]);
  });

  test("delete removes the encrypted file", async () => {
    await layer.delete("图片/空 格.png");
    expect(await layer.head("图片/空 格.png")).toBeNull();
    const reference = makeCrypt(passwords.password, passwords.password2);
    const ours = filesUnder(dir).filter((p) => {
      try {
        return reference.decryptPath(p) !== "";
      } catch {
        return false;
      }
    });
    expect(ours.length).toBe(2);
  });
});

describe("crypt layer: ranged reads fetch only the covering blocks", () => {
  const plain = new Uint8Array(randomBytes(5 * BLOCK_DATA_SIZE + 1000));
  const cipherSize = encryptedSize(plain.byteLength);
  const blockStart = (i: number) => HEADER_SIZE + i * BLOCK_CIPHER_SIZE;
  const setup = async () => {
    const { driver, log } = recording(createLocalDriver({ path: freshDir() }));
    const layer = wrapEncrypted(driver, channelPasswords(3));
    await layer.put("r/obj.bin", plain, plain.byteLength);
    log.gets.length = 0;
    return { layer, log };
  };

  test("a range across a 64 KiB boundary reads the header and exactly two blocks", async () => {
    const { layer, log } = await setup();
    const start = 2 * BLOCK_DATA_SIZE - 10;
    const got = await layer.get("r/obj.bin", { start, end: start + 19 });
    expect(got.size).toBe(20);
    expect(got.totalSize).toBe(plain.byteLength);
    expect(Buffer.compare(await readAll(got.stream), plain.subarray(start, start + 20))).toBe(0);
    expect(log.gets.map((g) => [g.range, g.served])).toEqual([
      [{ start: 0, end: HEADER_SIZE - 1 }, HEADER_SIZE],
      [{ start: blockStart(1), end: blockStart(3) - 1 }, 2 * BLOCK_CIPHER_SIZE],
    ]);
  });

  test("a range inside block 0 is one request for header + block 0", async () => {
    const { layer, log } = await setup();
    const got = await layer.get("r/obj.bin", { start: 5, end: 1000 });
    expect(Buffer.compare(await readAll(got.stream), plain.subarray(5, 1001))).toBe(0);
    expect(log.gets.length).toBe(1);
    expect(log.gets[0].range).toEqual({ start: 0, end: blockStart(1) - 1 });
    expect(log.gets[0].served).toBe(blockStart(1));
  });

  test("open-ended and past-the-end ranges read to the last (partial) block only", async () => {
    const { layer, log } = await setup();
    const start = 4 * BLOCK_DATA_SIZE + 3;
    const got = await layer.get("r/obj.bin", { start, end: 10 * BLOCK_DATA_SIZE });
    expect(got.size).toBe(plain.byteLength - start);
    expect(Buffer.compare(await readAll(got.stream), plain.subarray(start))).toBe(0);
    expect(log.gets[1].range).toEqual({ start: blockStart(4), end: cipherSize - 1 });
    expect(log.gets[1].served).toBe(cipherSize - blockStart(4));

    const tail = await layer.get("r/obj.bin", { start: plain.byteLength - 1 });
    expect(Array.from(await readAll(tail.stream))).toEqual([plain[plain.byteLength - 1]]);
  });

  test("a range starting past the end is a RangeError", async () => {
    const { layer } = await setup();
    await expect(layer.get("r/obj.bin", { start: plain.byteLength })).rejects.toBeInstanceOf(RangeError);
    await expect(layer.get("r/obj.bin", { start: 6 * BLOCK_DATA_SIZE, end: 7 * BLOCK_DATA_SIZE })).rejects.toBeInstanceOf(RangeError);
  });
});

describe("crypt layer: streaming put", () => {
  test("the inner driver gets a stream of the exact encrypted size, fed while the source is still producing", async () => {
    let produced = 0;
    let producedAtFirstWrite = -1;
    const total = 8 * 1024 * 1024 + 5;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (produced >= total) return controller.close();
        const n = Math.min(32 * 1024, total - produced);
        produced += n;
        controller.enqueue(new Uint8Array(n).fill(produced & 0xff));
      },
    });
    const inner = createLocalDriver({ path: freshDir() });
    const probe: Driver = {
      kind: inner.kind,
      async put(key, body, size) {
        expect(body).toBeInstanceOf(ReadableStream);
        expect(size).toBe(encryptedSize(total));
        const watched = (body as ReadableStream<Uint8Array>).pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              if (producedAtFirstWrite < 0 && chunk.byteLength > HEADER_SIZE) producedAtFirstWrite = produced;
              controller.enqueue(chunk);
            },
          }),
        );
        return inner.put(key, watched, size);
      },
      get: (k, r) => inner.get(k, r),
      head: (k) => inner.head(k),
      delete: (k) => inner.delete(k),
      list: (p) => inner.list(p),
      probe: (d) => inner.probe(d),
    };
    const layer = wrapEncrypted(probe, channelPasswords(4));
    await layer.put("big/stream.bin", source, total);
    expect(producedAtFirstWrite).toBeGreaterThan(0);
    expect(producedAtFirstWrite).toBeLessThan(1024 * 1024); // not buffered whole
    expect((await layer.head("big/stream.bin"))?.size).toBe(total);
  });

  test("a body longer than declared is rejected and nothing is stored", async () => {
    const layer = wrapEncrypted(createLocalDriver({ path: freshDir() }), channelPasswords(5));
    const bytes = new Uint8Array(randomBytes(200_000));
    await expect(layer.put("x/long.bin", chunkedStream(bytes), 100_000)).rejects.toThrow();
    expect(await layer.head("x/long.bin")).toBeNull();
  });
});

describe("crypt layer: keys per channel", () => {
  test("passwords depend on master key, channel id and created_at, and are stable", () => {
    const a = cryptPasswords(master, 1, CREATED);
    expect(cryptPasswords(master, 1, CREATED)).toEqual(a);
    const variants: CryptPasswords[] = [
      cryptPasswords(master, 2, CREATED),
      cryptPasswords(master, 1, "2026-01-01 00:00:01"),
      cryptPasswords(MasterKey.generate().key, 1, CREATED),
    ];
    for (const v of variants) {
      expect(v.password).not.toBe(a.password);
      expect(v.password2).not.toBe(a.password2);
    }
    expect(a.password).not.toBe(a.password2);
    expect(a.password.length).toBeGreaterThanOrEqual(32);
  });

  test("another channel's keys see nothing of this channel's objects", async () => {
    const dir = freshDir();
    const mine = wrapEncrypted(createLocalDriver({ path: dir }), channelPasswords(10));
    const other = wrapEncrypted(createLocalDriver({ path: dir }), cryptPasswords(master, 11, CREATED));
    await mine.put("img/aa/bb/k.jpg", new Uint8Array([1, 2, 3]), 3);
    expect(await listKeys(mine, "")).toEqual(["img/aa/bb/k.jpg"]);
    expect(await listKeys(other, "")).toEqual([]);
    expect(await other.head("img/aa/bb/k.jpg")).toBeNull();
    const missing = await other.get("img/aa/bb/k.jpg").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ObjectNotFoundError);
    expect((missing as Error).message).toContain("img/aa/bb/k.jpg"); // the caller's key, not the encrypted name
  });

  test("cryptWrapper wraps encrypted rows only, with that row's keys", async () => {
    const dir = freshDir();
    const row = { id: 42, created_at: CREATED, encrypted: 1 } as ChannelRow;
    const raw = createLocalDriver({ path: dir });
    expect(cryptWrapper(master)({ ...row, encrypted: 0 }, raw)).toBe(raw);
    const wrapped = cryptWrapper(master)(row, raw);
    await wrapped.put("a/b.txt", new TextEncoder().encode("hi"), 2);
    expect(filesUnder(dir)).toEqual([makeCrypt(channelPasswords(42).password, channelPasswords(42).password2).encryptPath("a/b.txt")]);
    const reader = wrapEncrypted(createLocalDriver({ path: dir }), channelPasswords(42));
    expect(new TextDecoder().decode(await readAll((await reader.get("a/b.txt")).stream))).toBe("hi");
  });
});

describe("crypt layer: deep probe", () => {
  test("round-trips through encryption and fails when stored ciphertext is corrupted", async () => {
    const dir = freshDir();
    const { driver, log } = recording(createLocalDriver({ path: dir }));
    const layer = wrapEncrypted(driver, channelPasswords(20));
    await layer.probe(true);
    expect(log.puts.length).toBe(1);
    expect(log.puts[0].key.startsWith("_kura")).toBe(false); // the probe object's name is encrypted too
    expect(log.puts[0].streamed).toBe(true);
    expect(filesUnder(dir)).toEqual([]);

    const inner = createLocalDriver({ path: dir });
    const flipping: Driver = {
      kind: inner.kind,
      put: (k, b, s) => inner.put(k, b, s),
      head: (k) => inner.head(k),
      delete: (k) => inner.delete(k),
      list: (p) => inner.list(p),
      probe: (d) => inner.probe(d),
      async get(key, range) {
        const got = await inner.get(key, range);
        const bytes = await readAll(got.stream);
        bytes[bytes.length - 1] ^= 1;
        return { ...got, stream: new Blob([bytes as Uint8Array<ArrayBuffer>]).stream() };
      },
    };
    await expect(wrapEncrypted(flipping, channelPasswords(20)).probe(true)).rejects.toThrow("加密层读写检查失败");
    expect(filesUnder(dir)).toEqual([]);
  });
});
