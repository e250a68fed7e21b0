import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanTempFiles, createLocalDriver, resolveLocalPath } from "../../src/channels/drivers/local.ts";
import { chunkedStream, driverConformance, listKeys, readAll } from "./conformance.ts";

const scratch = await mkdtemp(join(tmpdir(), "kura-local-test-"));
afterAll(() => rm(scratch, { recursive: true, force: true }));

let counter = 0;
async function freshBase(): Promise<string> {
  const dir = join(scratch, `base-${++counter}`);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** Every file under `dir`, relative, including hidden ones (temp files are hidden). */
async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/** A driver on a base that does not exist yet, made as setting the channel up makes it (service.ts). */
async function setUpDriver(base: string) {
  const driver = createLocalDriver({ path: base });
  await (driver as typeof driver & { createRoot: () => Promise<void> }).createRoot();
  return driver;
}

driverConformance("local", async () => {
  const base = join(await freshBase(), "not", "yet", "there");
  return { driver: await setUpDriver(base), cleanup: async () => {} };
});

describe("local driver: configuration and paths", () => {
  test("path must be given; a relative path lies under the data directory", async () => {
    expect(() => createLocalDriver({})).toThrow("path");
    // Without a data directory only absolute paths mean anything.
    expect(() => createLocalDriver({ path: "relative/dir" })).toThrow("绝对路径");
    const dataDir = await freshBase();
    expect(resolveLocalPath("relative/dir", dataDir)).toBe(join(dataDir, "relative/dir"));
    expect(resolveLocalPath("/abs/dir/", dataDir)).toBe("/abs/dir");
  });

  test("objects land under the base at their key path; escapes write nothing outside", async () => {
    const outer = await freshBase();
    const base = join(outer, "inner");
    const driver = await setUpDriver(base);
    await driver.put("ab/cd/file.jpg", new Uint8Array([1, 2, 3]), 3);
    expect(await Bun.file(join(base, "ab/cd/file.jpg")).bytes()).toEqual(new Uint8Array([1, 2, 3]));

    for (const key of ["../escaped", "ab/../../escaped", "/etc/escaped", "..\\escaped"]) {
      await expect(driver.put(key, new Uint8Array([1]), 1)).rejects.toThrow("非法对象键");
      await expect(driver.delete(key)).rejects.toThrow("非法对象键");
      await expect(driver.head(key)).rejects.toThrow("非法对象键");
    }
    await expect(driver.delete("../inner")).rejects.toThrow();
    expect(await allFiles(outer)).toEqual(["inner/ab/cd/file.jpg"]);
    await expect(listKeys(driver, "../")).rejects.toThrow("非法对象键");
  });
});

describe("local driver: reads", () => {
  test("get also offers the object as a file (for sendfile), with exactly the bytes of its stream, whole and ranged", async () => {
    const driver = createLocalDriver({ path: await freshBase() });
    const bytes = new Uint8Array(randomBytes(300_000));
    await driver.put("img/x.jpg", bytes, bytes.length);
    for (const range of [undefined, { start: 0, end: 0 }, { start: 1000, end: 250_000 }, { start: 299_990 }, { start: 10, end: 10_000_000 }]) {
      const got = await driver.get("img/x.jpg", range);
      const want = bytes.subarray(range?.start ?? 0, Math.min((range?.end ?? bytes.length) + 1, bytes.length));
      expect(got.file).toBeDefined();
      expect(got.file!.size).toBe(got.size);
      expect(new Uint8Array(await got.file!.arrayBuffer())).toEqual(want);
      expect(await readAll(got.stream)).toEqual(want);
    }
  });
});

describe("local driver: file-system errors", () => {
  test("are reported in Chinese with the key, and leave no temp files", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    await driver.put("dir/inside", new Uint8Array([1]), 1);
    await driver.put("file", new Uint8Array([1]), 1);
    // "dir" is a directory, so it cannot become a file; "file" cannot become a directory.
    await expect(driver.put("dir", new Uint8Array([2]), 1)).rejects.toThrow("本地存储写入失败: dir: 目标是一个目录");
    await expect(driver.put("file/below", new Uint8Array([2]), 1)).rejects.toThrow("本地存储写入失败: file/below");
    expect(await allFiles(base)).toEqual(["dir/inside", "file"]);
  });
});

describe("local driver: atomic writes", () => {
  test("a source stream failing halfway leaves neither the object nor a temp file", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    let sent = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 256 * 1024) return controller.error(new Error("client went away"));
        controller.enqueue(new Uint8Array(64 * 1024).fill(7));
        sent += 64 * 1024;
      },
    });
    await expect(driver.put("x/y/obj.bin", failing, 1024 * 1024)).rejects.toThrow("client went away");
    expect(await driver.head("x/y/obj.bin")).toBeNull();
    expect(await allFiles(base)).toEqual([]);
  });

  test("a failed overwrite keeps the previous version intact", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    const old = new Uint8Array(randomBytes(50_000));
    await driver.put("keep/me", old, old.byteLength);
    const bad = chunkedStream(new Uint8Array(10_000), 1000); // ends early: promised 20 000
    await expect(driver.put("keep/me", bad, 20_000)).rejects.toThrow("大小不符");
    expect(Buffer.compare(await readAll((await driver.get("keep/me")).stream), old)).toBe(0);
    expect(await allFiles(base)).toEqual(["keep/me"]);
  });

  test("while a write is in flight readers see only the old complete version", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    const old = new Uint8Array(randomBytes(30_000));
    const next = new Uint8Array(randomBytes(200_000));
    await driver.put("live/obj", old, old.byteLength);

    // Hand over the first half, then hold the stream open until we have looked.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let step = 0;
    const slow = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (step === 0) controller.enqueue(next.slice(0, 100_000));
        else if (step === 1) {
          await gate;
          controller.enqueue(next.slice(100_000));
        } else controller.close();
        step++;
      },
    });
    const writing = driver.put("live/obj", slow, next.byteLength);
    while (!(await allFiles(base)).some((f) => f.includes(".kura-tmp-"))) await Bun.sleep(2);

    expect((await driver.head("live/obj"))?.size).toBe(old.byteLength);
    expect(Buffer.compare(await readAll((await driver.get("live/obj")).stream), old)).toBe(0);
    expect(await listKeys(driver, "")).toEqual(["live/obj"]); // the temp file is not an object

    release();
    await writing;
    expect(Buffer.compare(await readAll((await driver.get("live/obj")).stream), next)).toBe(0);
    expect(await allFiles(base)).toEqual(["live/obj"]);
  });

  test("with publishAfter the bytes wait under the temp name: the key appears only once it resolves, and never if it rejects", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    expect(driver.stagesWrites).toBe(true);
    const bytes = new Uint8Array(randomBytes(40_000));
    let allow!: () => void;
    const writing = driver.put("staged/obj", bytes, bytes.byteLength, new Promise<void>((r) => (allow = r)));
    // The whole file is written (temp name, full size) while the key is still absent.
    const tempWritten = async () => {
      const temp = (await allFiles(base)).find((f) => f.includes(".kura-tmp-"));
      return temp !== undefined && Bun.file(join(base, temp)).size === bytes.byteLength;
    };
    const deadline = Date.now() + 5000;
    while (!(await tempWritten()) && Date.now() < deadline) await Bun.sleep(2);
    expect(await tempWritten()).toBe(true);
    await Bun.sleep(20);
    expect(await driver.head("staged/obj")).toBeNull();
    allow();
    await writing;
    expect(Buffer.compare(await readAll((await driver.get("staged/obj")).stream), bytes)).toBe(0);
    expect(await allFiles(base)).toEqual(["staged/obj"]);

    // A refused publish: the caller's own error comes back as it is, and no file is left.
    const refusal = new Error("intent refused");
    const refused = driver.put("staged/other", bytes, bytes.byteLength, Promise.reject(refusal));
    expect(await refused.catch((e: unknown) => e)).toBe(refusal);
    expect(await allFiles(base)).toEqual(["staged/obj"]);
  });
});

describe("local driver: temp file cleanup", () => {
  test("cleanTempFiles removes stale temp files only, at any depth", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    await driver.put("ab/cd/real.jpg", new Uint8Array([1]), 1);
    await driver.put(".hidden-but-real", new Uint8Array([2]), 1);
    await writeFile(join(base, "ab/cd/.real.jpg.kura-tmp-0123abcd"), "partial");
    await writeFile(join(base, ".top.kura-tmp-ff00"), "partial");
    await mkdir(join(base, "deep/er/still"), { recursive: true });
    await writeFile(join(base, "deep/er/still/.x.kura-tmp-99"), "partial");

    // Temp files are never listed as objects, even before cleanup.
    expect(await listKeys(driver, "")).toEqual([".hidden-but-real", "ab/cd/real.jpg"]);

    // Fresh ones survive when only stale ones are asked for (another writer may own them).
    expect(await cleanTempFiles(base, 60_000)).toBe(0);
    expect(await cleanTempFiles(base)).toBe(3);
    expect(await allFiles(base)).toEqual([".hidden-but-real", "ab/cd/real.jpg"]);
    expect(await cleanTempFiles(join(base, "missing-dir"))).toBe(0);
  });

  test("a temp file this process is still writing survives even a cleanup with no age cutoff", async () => {
    const base = await freshBase();
    const driver = createLocalDriver({ path: base });
    // A body that holds the write open until released: the temp file exists, the rename has not happened.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new Uint8Array([1, 2]));
        await held;
        c.enqueue(new Uint8Array([3]));
        c.close();
      },
    });
    const writing = driver.put("in/flight.jpg", body, 3);
    while (!(await allFiles(base)).some((f) => f.includes(".kura-tmp-"))) await Bun.sleep(2);
    // The file's mtime may read older than a cutoff taken a moment ago (the kernel's coarse clock):
    // only knowing which temp files are ours keeps them safe, so ask for every temp file.
    expect(await cleanTempFiles(base)).toBe(0);
    release();
    await writing;
    expect(await allFiles(base)).toEqual(["in/flight.jpg"]);
  });

  test("keys shaped like temp files are refused, so cleanup never deletes an object", async () => {
    const driver = createLocalDriver({ path: await freshBase() });
    await expect(driver.put("a/.b.kura-tmp-00ff", new Uint8Array([1]), 1)).rejects.toThrow("临时文件");
  });
});

describe("local driver: probe", () => {
  test("a missing base is reported, and neither a probe nor a put makes it (a disk not mounted); setting up does", async () => {
    const base = join(await freshBase(), "mnt", "disk");
    const driver = createLocalDriver({ path: base });
    // The directory is the channel's configuration: never named in the message (spec 6.3).
    const missing = "本地存储目录不可用：目录不存在（磁盘未挂载？";
    for (const deep of [false, true]) {
      const message = ((await driver.probe(deep).catch((err) => err)) as Error).message;
      expect(message).toStartWith(missing);
      expect(message).not.toContain(base);
    }
    for (const key of ["top.jpg", "ab/cd/file.jpg"]) {
      const message = ((await driver.put(key, new Uint8Array([1]), 1).catch((err) => err)) as Error).message;
      expect(message).toStartWith(missing);
      expect(message).not.toContain(base);
    }
    expect(existsSync(base)).toBe(false);
    await (driver as typeof driver & { createRoot: () => Promise<void> }).createRoot();
    await driver.probe(true);
    expect(existsSync(base)).toBe(true);
  });

  test("fails with a Chinese message when the base is a file", async () => {
    const parent = await freshBase();
    const base = join(parent, "occupied");
    await writeFile(base, "i am a file");
    const driver = createLocalDriver({ path: base });
    // The same words every time (an open alert's text follows the probe's): a recursive mkdir
    // over the file failed with EEXIST at one moment and succeeded at the next.
    for (let i = 0; i < 20; i++) {
      for (const deep of [false, true]) {
        expect(((await driver.probe(deep).catch((err) => err)) as Error).message).toBe("本地存储目录不可用：路径已存在且不是目录");
      }
    }
  });

  test("a file put in the base's place while the probe runs is named as such (or the base as missing), never by a raw error", async () => {
    const base = join(await freshBase(), "swapped");
    const driver = createLocalDriver({ path: base });
    const messages = new Set<string>();
    for (let i = 0; i < 200; i++) {
      await rm(base, { recursive: true, force: true });
      // The probe's stat is on its way when the file appears: it sees either the file or nothing.
      const probing = driver.probe(false).catch((err: Error) => err.message);
      const placed = await writeFile(base, "x").then(
        () => true,
        () => false,
      );
      const message = await probing;
      if (placed) messages.add(message ?? "ok");
    }
    const notADirectory = "本地存储目录不可用：路径已存在且不是目录";
    for (const message of messages) expect(message === notADirectory || message.startsWith("本地存储目录不可用：目录不存在")).toBe(true);
    expect(messages.has(notADirectory)).toBe(true);
  });

  test("fails when the base is not writable", async () => {
    const { chmod, chown } = await import("node:fs/promises");
    if (process.getuid?.() === 0) {
      // Root ignores permissions: probe as `nobody` in a child process instead (see unprivileged-probe.ts).
      const { probeAsNobody, NOBODY } = await import("./unprivileged-probe.ts");
      const base = await mkdtemp(join(tmpdir(), "kura-ro-base-"));
      try {
        await chmod(base, 0o755); // nobody may enter and read, not write
        expect(await probeAsNobody(base)).toEqual({ ok: false, message: expect.stringContaining("没有权限") });
        // Control: the same unprivileged probe succeeds once nobody owns the directory.
        await chown(base, NOBODY.uid, NOBODY.gid);
        expect(await probeAsNobody(base)).toEqual({ ok: true });
      } finally {
        await rm(base, { recursive: true, force: true });
      }
      return;
    }
    const base = await freshBase();
    await chmod(base, 0o555);
    try {
      await expect(createLocalDriver({ path: base }).probe(false)).rejects.toThrow("没有权限");
    } finally {
      await chmod(base, 0o755);
    }
  });
});
