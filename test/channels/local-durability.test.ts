/**
 * The local driver's durability rule, observed at the fsync calls themselves: a put resolves
 * only after the directory holding the renamed object is synced, and, when the put created
 * fan-out directories, after each new directory's parent is synced (its entry lives there).
 * An existing directory's parents are not synced again.
 */
import { afterAll, describe, expect, mock, test } from "bun:test";
import * as realFs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Directory fsyncs completed, by path, in order; and put resolutions between them. */
const events: string[] = [];
/** File fsyncs (a fresh key's data is synced after its rename). */
const fileSyncs: string[] = [];
/** Directories whose fsync is made slow, so a put that does not wait for it resolves first. */
const slow = new Set<string>();
const { statSync } = realFs;
// The driver syncs paths through durable-file's fsyncPath (fs/promises, off the libuv pool): observed there.
const realSyncs = await import("../../src/shared/durable-file.ts");
const { fsyncPath } = realSyncs;
let recording = false;
// bun test runs every file in one process: outside this file's test the mock only passes through.
mock.module("../../src/shared/durable-file.ts", () => ({
  ...realSyncs,
  async fsyncPath(path: string) {
    if (!recording) return fsyncPath(path);
    const isDir = statSync(path).isDirectory();
    await fsyncPath(path);
    await Bun.sleep(slow.has(path) ? 50 : 0);
    (isDir ? events : fileSyncs).push(`synced ${path}`);
  },
}));
const { createLocalDriver } = await import("../../src/channels/drivers/local.ts");

const scratch = await mkdtemp(join(tmpdir(), "kura-local-durability-"));
afterAll(() => rm(scratch, { recursive: true, force: true }));

const linux = process.platform === "linux";

describe("local driver: what a put makes durable before it resolves", () => {
  test.skipIf(!linux)("a put that creates fan-out directories syncs each new directory's parent, then only the target directory", async () => {
    recording = true;
    const base = join(scratch, "store");
    realFs.mkdirSync(base);
    const driver = createLocalDriver({ path: base });
    const bytes = new Uint8Array([1, 2, 3]);
    for (const dir of [base, join(base, "img"), join(base, "img/ab")]) slow.add(dir);

    events.length = 0;
    await driver.put("img/ab/cd/one.jpg", bytes, 3);
    events.push("resolved one");
    const before = (event: string) => events.indexOf(event) >= 0 && events.indexOf(event) < events.indexOf("resolved one");
    // img, img/ab and img/ab/cd are new: their entries are in base, img and img/ab.
    for (const dir of [base, join(base, "img"), join(base, "img/ab"), join(base, "img/ab/cd")]) {
      expect({ dir, synced: before(`synced ${dir}`) }).toEqual({ dir, synced: true });
    }

    events.length = 0;
    await driver.put("img/ab/cd/two.jpg", bytes, 3);
    expect(events).toEqual([`synced ${join(base, "img/ab/cd")}`]);

    // Two puts creating sibling directories at once: each waits for the shared parent's sync.
    events.length = 0;
    await Promise.all(["img/ab/ef/three.jpg", "img/ab/gh/four.jpg"].map((key) => driver.put(key, bytes, 3).then(() => events.push(`resolved ${key}`))));
    for (const key of ["img/ab/ef/three.jpg", "img/ab/gh/four.jpg"]) {
      const dir = key.slice(0, key.lastIndexOf("/"));
      const resolvedAt = events.indexOf(`resolved ${key}`);
      for (const synced of [join(base, "img/ab"), join(base, dir)]) {
        const at = events.indexOf(`synced ${synced}`);
        expect({ key, synced, before: at >= 0 && at < resolvedAt }).toEqual({ key, synced, before: true });
      }
    }
    expect(realFs.readFileSync(join(base, "img/ab/gh/four.jpg"))).toEqual(Buffer.from(bytes));
    recording = false;
  });

  test.skipIf(!linux)("a new key's bytes are synced (beside its directory) before the put resolves", async () => {
    recording = true;
    const base = join(scratch, "fresh");
    realFs.mkdirSync(join(base, "img/ab/cd"), { recursive: true });
    const driver = createLocalDriver({ path: base });
    const target = join(base, "img/ab/cd/new.jpg");
    slow.add(target);
    events.length = 0;
    fileSyncs.length = 0;
    await driver.put("img/ab/cd/new.jpg", new Uint8Array([4, 5, 6]), 3);
    // The slow file sync finished before the put resolved, and so did the directory's.
    expect(fileSyncs).toEqual([`synced ${target}`]);
    expect(events).toEqual([`synced ${join(base, "img/ab/cd")}`]);
    expect(realFs.readFileSync(target)).toEqual(Buffer.from([4, 5, 6]));
    slow.delete(target);
    recording = false;
  });
});
