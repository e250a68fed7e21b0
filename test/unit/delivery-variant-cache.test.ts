import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VariantCache } from "../../src/delivery/variant-cache.ts";

const SHA_A = "a".repeat(64);
const SHA_B = "b1".repeat(32);
const key = (sha: string, w: number, f = "webp") => `${sha}-${w}-${f}`;
const bytes = (n: number, fill = 7) => Buffer.alloc(n, fill);

/** Sum of sizes of all regular files under dir, as the disk sees them. */
function diskBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) total += statSync(join(e.parentPath, e.name)).size;
  }
  return total;
}

let dir: string;
beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), "kura-variants-")), "variants");
});
afterEach(() => rmSync(join(dir, ".."), { recursive: true, force: true }));

describe("VariantCache", () => {
  test("put then get returns the stored bytes under <2 hex>/<key>", async () => {
    const cache = new VariantCache({ dir, maxBytes: 10_000 });
    const k = key(SHA_A, 640);
    const path = await cache.put(k, Buffer.from("variant bytes"));
    expect(path).toBe(join(dir, "aa", k));
    const hit = cache.get(k);
    expect(hit).toEqual({ path: join(dir, "aa", k), size: 13 });
    expect(readFileSync(hit!.path, "utf8")).toBe("variant bytes");
    expect(cache.get(key(SHA_A, 320))).toBeUndefined();
    // no temp files left behind
    expect(readdirSync(join(dir, "aa"))).toEqual([k]);
  });

  test("evicts least recently used past the bound; bytes on disk stay within it", async () => {
    const evicted: string[] = [];
    const cache = new VariantCache({ dir, maxBytes: 3_000, onEvict: (k) => evicted.push(k) });
    const keys = [320, 640, 960, 1280, 1920].map((w) => key(SHA_A, w));
    await cache.put(keys[0]!, bytes(1000));
    await cache.put(keys[1]!, bytes(1000));
    await cache.put(keys[2]!, bytes(1000));
    expect(cache.get(keys[0]!)).toBeDefined(); // 320 is now most recent; 640 is the LRU
    await cache.put(keys[3]!, bytes(1000));
    expect(evicted).toEqual([keys[1]!]);
    expect(cache.get(keys[1]!)).toBeUndefined();
    expect(existsSync(join(dir, "aa", keys[1]!))).toBe(false);
    await cache.put(keys[4]!, bytes(1500)); // needs two victims: 960 then 320
    expect(evicted).toEqual([keys[1]!, keys[2]!, keys[0]!]);
    expect(cache.totalBytes).toBe(2500);
    expect(diskBytes(dir)).toBe(2500);
    expect(diskBytes(dir)).toBeLessThanOrEqual(3_000);
  });

  test("many concurrent puts end within the bound on disk", async () => {
    const cache = new VariantCache({ dir, maxBytes: 20_000 });
    await Promise.all(Array.from({ length: 60 }, (_, i) => cache.put(key(i % 2 ? SHA_A : SHA_B, i + 1), bytes(700 + i))));
    expect(diskBytes(dir)).toBeLessThanOrEqual(20_000);
    expect(diskBytes(dir)).toBe(cache.totalBytes);
    expect(cache.totalBytes).toBeGreaterThan(20_000 - 800); // evicts only what it must
  });

  test("an item larger than the bound (or a zero-size cache) is not kept", async () => {
    const cache = new VariantCache({ dir, maxBytes: 100 });
    expect(await cache.put(key(SHA_A, 1), bytes(101))).toBeNull();
    expect(cache.get(key(SHA_A, 1))).toBeUndefined();
    expect(diskBytes(dir)).toBe(0);
    await cache.setMaxBytes(0);
    expect(await cache.put(key(SHA_A, 2), bytes(1))).toBeNull();
  });

  test("shrinking the bound at runtime evicts at once", async () => {
    const cache = new VariantCache({ dir, maxBytes: 10_000 });
    for (let w = 1; w <= 5; w++) await cache.put(key(SHA_A, w), bytes(1000));
    await cache.setMaxBytes(2_500);
    expect(cache.count).toBe(2);
    expect(cache.get(key(SHA_A, 5))).toBeDefined();
    expect(cache.get(key(SHA_A, 4))).toBeDefined();
    expect(diskBytes(dir)).toBe(2000);
  });

  test("re-putting a key replaces it without double counting", async () => {
    const cache = new VariantCache({ dir, maxBytes: 10_000 });
    await cache.put(key(SHA_A, 1), bytes(1000, 1));
    await cache.put(key(SHA_A, 1), bytes(400, 2));
    expect(cache.totalBytes).toBe(400);
    expect(readFileSync(cache.get(key(SHA_A, 1))!.path)).toEqual(bytes(400, 2));
  });

  test("rebuilds the index from disk, oldest mtime evicted first, temp files cleaned", async () => {
    const first = new VariantCache({ dir, maxBytes: 10_000 });
    const old = key(SHA_A, 320);
    const fresh = key(SHA_B, 640, "avif");
    await first.put(old, bytes(600));
    await first.put(fresh, bytes(900));
    utimesSync(join(dir, "aa", old), new Date(2020, 0, 1), new Date(2020, 0, 1));
    writeFileSync(join(dir, "aa", `.tmp-${old}-123-abc`), bytes(50)); // crash leftover
    mkdirSync(join(dir, "zz"));
    writeFileSync(join(dir, "zz", "README"), "not ours"); // foreign file: left alone

    const second = new VariantCache({ dir, maxBytes: 10_000 });
    expect(second.count).toBe(2);
    expect(second.totalBytes).toBe(1500);
    expect(second.get(fresh)).toEqual({ path: join(dir, "b1", fresh), size: 900 });
    expect(existsSync(join(dir, "aa", `.tmp-${old}-123-abc`))).toBe(false);
    expect(existsSync(join(dir, "zz", "README"))).toBe(true);

    // A smaller bound at start evicts by mtime: the 2020 file goes first.
    const evicted: string[] = [];
    const third = new VariantCache({ dir, maxBytes: 1000, onEvict: (k) => evicted.push(k) });
    expect(evicted).toEqual([old]);
    expect(third.count).toBe(1);
    expect(existsSync(join(dir, "aa", old))).toBe(false);
    expect(existsSync(join(dir, "b1", fresh))).toBe(true);
  });

  test("deletePrefix removes every variant of one blob only", async () => {
    const cache = new VariantCache({ dir, maxBytes: 100_000 });
    for (const w of [0, 320, 640]) await cache.put(key(SHA_A, w), bytes(100));
    await cache.put(key(SHA_A, 320, "jpeg"), bytes(100));
    await cache.put(key(SHA_B, 320), bytes(100));
    expect(await cache.deletePrefix(SHA_A)).toBe(4);
    expect(cache.count).toBe(1);
    expect(cache.totalBytes).toBe(100);
    expect(readdirSync(join(dir, "aa"))).toEqual([]);
    expect(cache.get(key(SHA_B, 320))).toBeDefined();
  });

  test("delete removes one entry and its file", async () => {
    const cache = new VariantCache({ dir, maxBytes: 100_000 });
    const p = (await cache.put(key(SHA_A, 1), bytes(10)))!;
    expect(await cache.delete(key(SHA_A, 1))).toBe(true);
    expect(existsSync(p)).toBe(false);
    expect(cache.totalBytes).toBe(0);
    expect(await cache.delete(key(SHA_A, 1))).toBe(false);
  });

  test("keys that could escape the directory are refused", async () => {
    const cache = new VariantCache({ dir, maxBytes: 100_000 });
    await expect(cache.put("../../etc-passwd", bytes(1))).rejects.toThrow();
    await expect(cache.put(".hidden-key", bytes(1))).rejects.toThrow();
    expect(await cache.delete("../x")).toBe(false);
  });
});
