/**
 * Behaviour every storage driver must share, run against a real backend.
 * Usage in a driver's test file:
 *
 *   driverConformance("s3", async () => ({ driver, cleanup }));
 *
 * `makeDriver` is called once per `describe` block and must return a driver over
 * an empty, private base (directory, bucket prefix, …); `cleanup` tears it down.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { ObjectNotFoundError, type Driver } from "../../src/channels/driver.ts";

export type DriverFactory = () => Promise<{ driver: Driver; cleanup: () => Promise<void> }>;

export async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** A stream delivering `bytes` in `chunk`-sized pieces, pulled lazily like a real upload. */
export function chunkedStream(bytes: Uint8Array, chunk = 64 * 1024): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.byteLength) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + chunk));
      offset += chunk;
    },
  });
}

export async function listKeys(driver: Driver, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of driver.list(prefix)) keys.push(info.key);
  return keys.sort();
}

function expectSameBytes(actual: Uint8Array, expected: Uint8Array): void {
  expect(actual.byteLength).toBe(expected.byteLength);
  // Compare as Buffers: one call, and a readable diff position on failure.
  expect(Buffer.compare(Buffer.from(actual), Buffer.from(expected))).toBe(0);
}

async function expectNotFound(promise: Promise<unknown>): Promise<void> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ObjectNotFoundError);
}

export function driverConformance(name: string, makeDriver: DriverFactory): void {
  describe(`driver conformance: ${name}`, () => {
    let driver: Driver;
    let cleanup: () => Promise<void> = async () => {};

    beforeAll(async () => {
      ({ driver, cleanup } = await makeDriver());
    });
    afterAll(async () => {
      await driver?.close?.();
      await cleanup();
    });

    test("put/get roundtrip of binary bytes, from a Uint8Array", async () => {
      const bytes = new Uint8Array(randomBytes(4096));
      bytes[0] = 0; // make sure NUL and high bytes survive
      bytes[1] = 0xff;
      await driver.put("rt/bytes.bin", bytes, bytes.byteLength);
      const got = await driver.get("rt/bytes.bin");
      expect(got.size).toBe(bytes.byteLength);
      expect(got.totalSize).toBe(bytes.byteLength);
      expectSameBytes(await readAll(got.stream), bytes);
    });

    test("0-byte object", async () => {
      await driver.put("rt/empty", new Uint8Array(0), 0);
      const got = await driver.get("rt/empty");
      expect(got.size).toBe(0);
      expect((await readAll(got.stream)).byteLength).toBe(0);
      expect((await driver.head("rt/empty"))?.size).toBe(0);
    });

    test("~3 MB object streamed in chunks", async () => {
      const bytes = new Uint8Array(randomBytes(3 * 1024 * 1024 + 12345));
      await driver.put("rt/big/three-mb.bin", chunkedStream(bytes), bytes.byteLength);
      const info = await driver.head("rt/big/three-mb.bin");
      expect(info?.size).toBe(bytes.byteLength);
      const got = await driver.get("rt/big/three-mb.bin");
      expect(got.totalSize).toBe(bytes.byteLength);
      expectSameBytes(await readAll(got.stream), bytes);
    });

    test("a stream shorter than the declared size is rejected and stores nothing", async () => {
      const bytes = new Uint8Array(randomBytes(1000));
      await expect(driver.put("rt/short.bin", chunkedStream(bytes, 100), 2000)).rejects.toThrow();
      expect(await driver.head("rt/short.bin")).toBeNull();
    });

    test("overwrite replaces content and size", async () => {
      await driver.put("ow/obj", new TextEncoder().encode("first version, longer"), 21);
      const second = new TextEncoder().encode("second");
      await driver.put("ow/obj", second, second.byteLength);
      expect((await driver.head("ow/obj"))?.size).toBe(second.byteLength);
      expectSameBytes(await readAll((await driver.get("ow/obj")).stream), second);
    });

    describe("ranged get", () => {
      const bytes = new Uint8Array(randomBytes(100_000));
      beforeAll(async () => {
        await driver.put("range/obj.bin", bytes, bytes.byteLength);
      });

      test("start-end (inclusive)", async () => {
        const got = await driver.get("range/obj.bin", { start: 10, end: 19 });
        expect(got.size).toBe(10);
        expect(got.totalSize).toBe(bytes.byteLength);
        expectSameBytes(await readAll(got.stream), bytes.subarray(10, 20));
      });

      test("open-ended", async () => {
        const got = await driver.get("range/obj.bin", { start: 99_000 });
        expect(got.size).toBe(1000);
        expect(got.totalSize).toBe(bytes.byteLength);
        expectSameBytes(await readAll(got.stream), bytes.subarray(99_000));
      });

      test("last block and single last byte", async () => {
        const block = await driver.get("range/obj.bin", { start: 100_000 - 4096, end: 99_999 });
        expectSameBytes(await readAll(block.stream), bytes.subarray(100_000 - 4096));
        const last = await driver.get("range/obj.bin", { start: 99_999, end: 99_999 });
        expect(last.size).toBe(1);
        expectSameBytes(await readAll(last.stream), bytes.subarray(99_999));
      });

      test("end past the object is clamped to the last byte", async () => {
        const got = await driver.get("range/obj.bin", { start: 99_990, end: 500_000 });
        expect(got.size).toBe(10);
        expectSameBytes(await readAll(got.stream), bytes.subarray(99_990));
      });

      test("first byte", async () => {
        const got = await driver.get("range/obj.bin", { start: 0, end: 0 });
        expect(got.size).toBe(1);
        expectSameBytes(await readAll(got.stream), bytes.subarray(0, 1));
      });
    });

    test("head reports size; head of a missing key is null", async () => {
      const bytes = new Uint8Array(randomBytes(777));
      await driver.put("head/present", bytes, bytes.byteLength);
      const info = await driver.head("head/present");
      expect(info).not.toBeNull();
      expect(info!.size).toBe(777);
      expect(info!.key).toBe("head/present");
      expect(await driver.head("head/absent")).toBeNull();
      expect(await driver.head("head-nowhere/deeper/absent")).toBeNull();
    });

    test("get of a missing key throws ObjectNotFoundError (also ranged)", async () => {
      await expectNotFound(driver.get("missing/nothing-here"));
      await expectNotFound(driver.get("missing/nothing-here", { start: 0, end: 10 }));
    });

    test("delete removes the object and is idempotent", async () => {
      await driver.put("del/obj", new Uint8Array([1, 2, 3]), 3);
      await driver.delete("del/obj");
      expect(await driver.head("del/obj")).toBeNull();
      await expectNotFound(driver.get("del/obj"));
      await driver.delete("del/obj");
      await driver.delete("del/never-existed/at-all");
    });

    test("list is recursive, filters by prefix and keeps unusual key characters", async () => {
      const keys = [
        "lst/a.txt",
        "lst/sub/b.txt",
        "lst/sub/deeper/c.txt",
        "lst/with space/名前 ünïcödé.jpg",
        "lst/plus+and&amp;%25'=.bin",
        "lstx/not-under-lst-slash.txt",
        "other/d.txt",
      ];
      for (const [i, key] of keys.entries()) {
        const body = new Uint8Array(i + 1).fill(i);
        await driver.put(key, body, body.byteLength);
      }
      expect(await listKeys(driver, "lst/")).toEqual(keys.filter((k) => k.startsWith("lst/")).sort());
      expect(await listKeys(driver, "lst/sub/")).toEqual(["lst/sub/b.txt", "lst/sub/deeper/c.txt"]);
      // A prefix need not end at a '/' boundary.
      expect(await listKeys(driver, "lst")).toEqual(keys.filter((k) => k.startsWith("lst")).sort());
      expect(await listKeys(driver, "lst/with space/名前")).toEqual(["lst/with space/名前 ünïcödé.jpg"]);
      expect(await listKeys(driver, "nothing-here/")).toEqual([]);

      const sizes = new Map<string, number>();
      for await (const info of driver.list("lst/")) sizes.set(info.key, info.size);
      expect(sizes.get("lst/sub/deeper/c.txt")).toBe(keys.indexOf("lst/sub/deeper/c.txt") + 1);
      expect(sizes.get("lst/plus+and&amp;%25'=.bin")).toBe(keys.indexOf("lst/plus+and&amp;%25'=.bin") + 1);

      // Unusual keys must also round-trip through get/head/delete, not just list.
      const odd = "lst/plus+and&amp;%25'=.bin";
      expectSameBytes(await readAll((await driver.get(odd)).stream), new Uint8Array(keys.indexOf(odd) + 1).fill(keys.indexOf(odd)));
      await driver.delete(odd);
      expect(await driver.head(odd)).toBeNull();
      expect(await listKeys(driver, "lst/plus")).toEqual([]);
    });

    test("list with the empty prefix sees everything", async () => {
      await driver.put("everything/x", new Uint8Array([9]), 1);
      await driver.put("top-level-key", new Uint8Array([8]), 1);
      const all = await listKeys(driver, "");
      expect(all).toContain("everything/x");
      expect(all).toContain("top-level-key");
    });

    test("probe shallow and deep succeed and leave no probe objects behind", async () => {
      await driver.probe(false);
      await driver.probe(true);
      expect(await listKeys(driver, "_kura/probe/")).toEqual([]);
    });

    test("keys that could escape the base are rejected", async () => {
      for (const key of ["../x", "a/../../x", "/abs", "a//b", "a/./b", "a\\b", "nul\0x", ""]) {
        await expect(driver.put(key, new Uint8Array([1]), 1)).rejects.toThrow("非法对象键");
        await expect(driver.get(key)).rejects.toThrow("非法对象键");
      }
    });
  });
}
