/**
 * The encrypted-channel layer over an inner driver in memory that hands out bytes chunk by chunk
 * and only on demand (the local driver's one large chunk hides these paths): ranged reads whatever
 * chunks the header arrives in, what is pulled before the consumer asks, cancels, short and
 * impossible sizes, listings of encrypted names, and the pinned channel passwords and deep probe.
 */
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { cryptPasswords, wrapEncrypted } from "../../src/channels/crypt-layer.ts";
import { ObjectNotFoundError, type ByteRange, type Driver } from "../../src/channels/driver.ts";
import { makeCrypt } from "../../src/channels/rclone/crypt.ts";
import { BLOCK_CIPHER_SIZE, BLOCK_DATA_SIZE, HEADER_SIZE, encryptBuffer, encryptedSize } from "../../src/channels/rclone/crypt-data.ts";
import { MasterKey } from "../../src/config/master-key.ts";
import { listKeys, readAll } from "../channels/conformance.ts";
import { errorOf } from "../helpers/rejection.ts";

const master = MasterKey.generate().key;
const CREATED = "2026-01-01 00:00:00";
const channelPasswords = (id: number) => cryptPasswords(master, id, CREATED);

interface MemoryLog {
  gets: { key: string; range?: ByteRange }[];
  lists: string[];
  probes: boolean[];
  puts: { key: string; size: number; publishAfter?: Promise<unknown> }[];
  /** Chunks handed out by every get stream, and the reasons those streams were cancelled with. */
  pulled: number;
  cancels: unknown[];
  closed: number;
}

/**
 * An inner driver in memory whose get streams hand out `chunk` bytes per pull (the first
 * `firstChunk`), only on demand, and record their cancels: the crypt layer's own stream handling
 * is then seen chunk by chunk, which the local driver's one large chunk hides.
 */
function memoryDriver(opts: { chunk?: number; firstChunk?: number; stagesWrites?: boolean } = {}) {
  const objects = new Map<string, Uint8Array>();
  const log: MemoryLog = { gets: [], lists: [], probes: [], puts: [], pulled: 0, cancels: [], closed: 0 };
  const chunk = opts.chunk ?? 4096;
  const driver: Driver = {
    kind: "memory",
    ...(opts.stagesWrites === undefined ? {} : { stagesWrites: opts.stagesWrites }),
    async put(key, body, size, publishAfter) {
      log.puts.push({ key, size, publishAfter });
      objects.set(key, body instanceof Uint8Array ? body : await readAll(body));
    },
    async get(key, range) {
      log.gets.push({ key, range: range && { ...range } });
      const whole = objects.get(key);
      if (!whole) throw new ObjectNotFoundError(key);
      const start = range?.start ?? 0;
      const bytes = whole.subarray(start, range?.end === undefined ? whole.length : range.end + 1);
      let at = 0;
      const stream = new ReadableStream<Uint8Array>(
        {
          pull(c) {
            if (at >= bytes.length) return c.close();
            const n = at === 0 ? (opts.firstChunk ?? chunk) : chunk;
            c.enqueue(bytes.slice(at, at + n));
            at += n;
            log.pulled++;
          },
          cancel(reason) {
            log.cancels.push(reason);
          },
        },
        { highWaterMark: 0 },
      );
      return { stream, size: bytes.length, totalSize: whole.length };
    },
    async head(key) {
      const bytes = objects.get(key);
      return bytes ? { key, size: bytes.length } : null;
    },
    async delete(key) {
      objects.delete(key);
    },
    async *list(prefix) {
      log.lists.push(prefix);
      for (const [key, bytes] of objects) if (key.startsWith(prefix)) yield { key, size: bytes.length };
    },
    async probe(deep) {
      log.probes.push(deep);
    },
    async close() {
      log.closed++;
    },
  };
  return { driver, objects, log };
}

/** The error a promise rejects with (fails the test when it resolves). */

describe("crypt layer: stream handling over a chunked inner driver", () => {
  const passwords = channelPasswords(30);
  const reference = makeCrypt(passwords.password, passwords.password2);
  const plain = new Uint8Array(randomBytes(3 * BLOCK_DATA_SIZE + 500));
  const setup = async (opts: Parameters<typeof memoryDriver>[0] = {}) => {
    const inner = memoryDriver(opts);
    const layer = wrapEncrypted(inner.driver, passwords);
    await layer.put("r/obj.bin", plain, plain.byteLength);
    inner.log.gets.length = 0;
    return { layer, ...inner };
  };

  test("a ranged read from block 0 gives the same bytes whatever chunks the header arrives in", async () => {
    for (const [firstChunk, chunk] of [
      [10, 10],
      [7, 4096],
      [32, 4096],
      [33, 5],
      [HEADER_SIZE + BLOCK_CIPHER_SIZE + 9, 1000],
    ]) {
      const { layer } = await setup({ firstChunk, chunk });
      for (const range of [{ start: 0 }, { start: 5 }, { start: 3, end: 2 * BLOCK_DATA_SIZE + 4 }, { start: BLOCK_DATA_SIZE - 1, end: BLOCK_DATA_SIZE }]) {
        const got = await layer.get("r/obj.bin", range);
        const bytes = await readAll(got.stream);
        expect({ firstChunk, chunk, range, same: Buffer.compare(bytes, plain.subarray(range.start, (range.end ?? plain.length - 1) + 1)) }).toEqual({
          firstChunk,
          chunk,
          range,
          same: 0,
        });
      }
    }
  });

  test("an open-ended range from block 0 asks the inner driver for everything, a closed one for whole blocks", async () => {
    const { layer, log } = await setup();
    await readAll((await layer.get("r/obj.bin", { start: 5 })).stream);
    await readAll((await layer.get("r/obj.bin", { start: 5, end: BLOCK_DATA_SIZE + 1 })).stream);
    expect(log.gets.map((g) => g.range)).toEqual([
      { start: 0, end: undefined },
      { start: 0, end: HEADER_SIZE + 2 * BLOCK_CIPHER_SIZE - 1 },
    ]);
    expect(Number.isNaN(log.gets[0].range?.end)).toBe(false);
  });

  test("a ranged read pulls nothing past the header before its consumer reads, and a cancel reaches the inner stream", async () => {
    const { layer, log } = await setup({ firstChunk: HEADER_SIZE });
    const got = await layer.get("r/obj.bin", { start: 0 });
    await Bun.sleep(20);
    expect(log.pulled).toBe(1);
    const reader = got.stream.getReader();
    expect((await reader.read()).value!.length).toBe(BLOCK_DATA_SIZE);
    await reader.cancel("client went away");
    expect(log.cancels).toEqual(["client went away"]);
  });

  test("a stream that ends inside the header is a short file, in the format's words", async () => {
    const { driver, objects } = await setup();
    const [cipherKey] = objects.keys();
    const stored = objects.get(cipherKey)!;
    // The inner driver reports the full size but delivers only 20 bytes (a peer closing early).
    const cut: Driver = {
      ...driver,
      get: async () => ({ stream: new Blob([stored.subarray(0, 20) as Uint8Array<ArrayBuffer>]).stream(), size: 20, totalSize: stored.length }),
    };
    const short = wrapEncrypted(cut, passwords);
    for (const range of [undefined, { start: 0 }, { start: 2 * BLOCK_DATA_SIZE }]) {
      const err = await errorOf(short.get("r/obj.bin", range).then((g) => readAll(g.stream)));
      expect(err.message).toMatch(/过短/);
    }
  });

  test("a stored object of a size no crypt file has: whole reads fail and cancel, heads and listings say 0 bytes", async () => {
    const { layer, objects, log } = await setup();
    const [cipherKey] = objects.keys();
    objects.set(cipherKey, objects.get(cipherKey)!.subarray(0, HEADER_SIZE + 10)); // inside the first tag
    const whole = await errorOf(layer.get("r/obj.bin"));
    expect(whole.message).toMatch(/大小无效/);
    expect(log.cancels.length).toBe(1);
    // A broken object is not an unsatisfiable range (that would answer 416 instead of failing).
    const ranged = await errorOf(layer.get("r/obj.bin", { start: 0, end: 5 }));
    expect(ranged).not.toBeInstanceOf(RangeError);
    expect(ranged.message).toMatch(/大小无效/);
    expect(log.cancels.length).toBe(2);
    expect((await layer.head("r/obj.bin"))?.size).toBe(0);
    const listed = [];
    for await (const info of layer.list("r/")) listed.push(info);
    expect(listed).toEqual([{ key: "r/obj.bin", size: 0 }]);
  });

  test("a malformed range is a RangeError naming it, before any request reaches the inner driver", async () => {
    const { layer, log } = await setup();
    for (const [range, text] of [
      [{ start: -1 }, "-1-"],
      [{ start: 0.5 }, "0.5-"],
      [{ start: Number.NaN }, "NaN-"],
      [{ start: 5, end: 4 }, "5-4"],
      [{ start: 0, end: 2.5 }, "0-2.5"],
      [{ start: 2 * BLOCK_DATA_SIZE, end: BLOCK_DATA_SIZE }, `${2 * BLOCK_DATA_SIZE}-${BLOCK_DATA_SIZE}`],
    ] as [ByteRange, string][]) {
      const err = await errorOf(layer.get("r/obj.bin", range));
      expect(err).toBeInstanceOf(RangeError);
      expect(err.message).toBe(`请求的范围无效: ${text}`);
    }
    expect(log.gets).toEqual([]);
    // A well-formed range past the end is found out from the stored size, and named the same way.
    const past = await errorOf(layer.get("r/obj.bin", { start: plain.length }));
    expect(past).toBeInstanceOf(RangeError);
    expect(past.message).toBe(`请求的范围无效: ${plain.length}-`);
    const pastEnd = await errorOf(layer.get("r/obj.bin", { start: plain.length, end: plain.length + 9 }));
    expect(pastEnd.message).toBe(`请求的范围无效: ${plain.length}-${plain.length + 9}`);
  });

  test("kind, staged writes, publishAfter and close are the inner driver's", async () => {
    for (const stagesWrites of [true, false, undefined]) {
      const { driver, log } = memoryDriver({ stagesWrites });
      const layer = wrapEncrypted(driver, passwords);
      expect(layer.kind).toBe("memory");
      expect(layer.stagesWrites).toBe(stagesWrites === true);
      const published = Promise.resolve();
      await layer.put("a/b.bin", new Uint8Array(3), 3, published);
      expect(log.puts[0].publishAfter).toBe(published);
      expect(log.puts[0].size).toBe(encryptedSize(3));
      await layer.close?.();
      expect(log.closed).toBe(1);
    }
  });

  test("a listing walks the deepest encrypted directory of the prefix, and refuses unsafe prefixes", async () => {
    const { layer, log } = await setup();
    await layer.put("r/sub/x.bin", new Uint8Array(1), 1);
    await layer.put("q.bin", new Uint8Array(1), 1);
    expect(await listKeys(layer, "r/s")).toEqual(["r/sub/x.bin"]);
    expect(await listKeys(layer, "r/sub/")).toEqual(["r/sub/x.bin"]);
    expect(await listKeys(layer, "q")).toEqual(["q.bin"]);
    expect(log.lists).toEqual([`${reference.encryptPath("r")}/`, `${reference.encryptPath("r/sub")}/`, ""]);
    for (const bad of ["../", "a/../b", "/r/", "a\\b"]) await expect(listKeys(layer, bad)).rejects.toThrow(/非法对象键/);
  });

  test("stored names that decrypt to something no Kura key can be are left out of a listing", async () => {
    const { layer, objects } = await setup();
    for (const foreign of ["a/../b.jpg", "a\\b.jpg", "./c.jpg"]) objects.set(reference.encryptPath(foreign), encryptBufferFor(reference, 1));
    expect(await listKeys(layer, "")).toEqual(["r/obj.bin"]);
  });
});

/** An object of `n` zero bytes as the crypt layer would store it. */
function encryptBufferFor(crypt: ReturnType<typeof makeCrypt>, n: number): Uint8Array {
  return encryptBuffer(new Uint8Array(n), crypt.keys);
}

describe("crypt layer: passwords and the deep probe", () => {
  test("the passwords of a channel are pinned: a changed label or input would lock every encrypted channel out", () => {
    const key = MasterKey.parse("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    expect(cryptPasswords(key, 7, "2026-01-01 00:00:00")).toEqual({
      password: "UbB7Szr-SAhOmw5iLjqyTBpZioAHYmJ4BX6ec5Zq-_w",
      password2: "ySUjgDdQ1zzuIOqiynBoDpiVpTeMIQ50E-j5SNNmibQ",
    });
  });

  test("a shallow probe only probes the inner driver shallowly; a deep one writes nothing the inner driver writes in clear", async () => {
    const { driver, log, objects } = memoryDriver();
    const layer = wrapEncrypted(driver, channelPasswords(31));
    await layer.probe(false);
    expect(log.probes).toEqual([false]);
    expect(log.puts).toEqual([]);
    await layer.probe(true);
    expect(log.probes).toEqual([false, false]);
    expect(log.puts.length).toBe(1);
    expect(objects.size).toBe(0);
  });

  /** A deep probe over an inner driver whose answers `tamper` rewrites; returns its error. */
  async function probeFailure(tamper: (inner: Driver, crypt: ReturnType<typeof makeCrypt>) => Partial<Driver>): Promise<Error> {
    const passwords = channelPasswords(32);
    const crypt = makeCrypt(passwords.password, passwords.password2);
    const { driver, objects } = memoryDriver();
    const layer = wrapEncrypted({ ...driver, ...tamper(driver, crypt) }, passwords);
    const err = await errorOf(layer.probe(true));
    expect(err.message).toStartWith("加密层读写检查失败: ");
    expect((err as Error & { cause?: unknown }).cause).toBeInstanceOf(Error);
    expect(objects.size).toBe(0); // the probe object is deleted even when the check fails
    return err;
  }

  test("a deep probe fails when the stored object is missing or of the wrong size", async () => {
    expect((await probeFailure(() => ({ head: async () => null }))).message).toContain("存储中的对象大小与加密格式不符");
    const wrongSize = await probeFailure((inner) => ({ head: async (key) => ({ key, size: ((await inner.head(key))?.size ?? 0) + 1 }) }));
    expect(wrongSize.message).toContain("存储中的对象大小与加密格式不符");
  });

  test("a deep probe fails when the read-back is longer than written, or different, though well encrypted", async () => {
    const swapped = (extra: number) => (inner: Driver, crypt: ReturnType<typeof makeCrypt>) => ({
      get: async (key: string) => {
        const other = encryptBuffer(new Uint8Array(randomBytes(64 + extra)), crypt.keys);
        await inner.get(key);
        return { stream: new Blob([other as Uint8Array<ArrayBuffer>]).stream(), size: other.length, totalSize: other.length };
      },
    });
    expect((await probeFailure(swapped(1))).message).toContain("读回的数据比写入的更长");
    expect((await probeFailure(swapped(0))).message).toContain("读回的数据与写入不一致");
  });
});
