/**
 * Fault tier: libvips out of file descriptors, for real (this test process's own soft limit lowered
 * with prlimit). libvips words a file it could not open as "Input file contains unsupported image
 * format"; an upload read from a temp file at that moment must come out as the server's fault (the
 * EMFILE behind it, which every surface answers as a retryable 503), never as a damaged image.
 * A clean-clone CI run found the S3 PUT answering 400 InvalidArgument this way: the upload's head
 * was read, then the last descriptor went elsewhere before libvips opened the file.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Invalid, isOutOfFileDescriptors } from "../../src/errors";
import { serverFaultBehind } from "../../src/images/pixel-faults";
import sharp from "sharp";
import { type ExifPolicy, prepareImage } from "../../src/images/upload/prepare";
import { makePng } from "../helpers/images";
import { tuneNativeMemory } from "../../src/native/memory-tuning";
import { hardOpenFileLimit, openDescriptors, setSoftOpenFileLimit } from "./harness";

// As `kura serve` runs libvips: without its operation cache, which would otherwise hold files
// open and let them go at moments of its own choosing (this test counts descriptors exactly).
tuneNativeMemory();

/** Read once: reading it again would take a descriptor, which a starved moment has none of. */
const hardLimit = hardOpenFileLimit();

/**
 * Runs `fn` with no descriptor to spare: the limit lowered a little, then every descriptor left
 * taken (descriptors the runtime closes a moment later, after a spawn, are taken too once they
 * free up). A few are held aside across it and closed first thing after: giving the limit back
 * spawns prlimit, which itself takes descriptors.
 */
async function starved<T>(fn: () => Promise<T>): Promise<T> {
  const reserve = Array.from({ length: 8 }, () => openSync("/dev/null", "r"));
  setSoftOpenFileLimit(process.pid, openDescriptors(process.pid) + 16);
  const filler: number[] = [];
  for (let taken = -1; taken !== filler.length; await Bun.sleep(25)) {
    taken = filler.length;
    for (;;) {
      try {
        filler.push(openSync("/dev/null", "r"));
      } catch {
        break;
      }
    }
  }
  try {
    return await fn();
  } finally {
    for (const fd of [...reserve, ...filler]) closeSync(fd);
    setSoftOpenFileLimit(process.pid, hardLimit);
  }
}

const dir = mkdtempSync(join(tmpdir(), "kura-pixel-fds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const failureOf = (p: Promise<unknown>) => p.then(() => undefined).catch((err: unknown) => err);

describe("serverFaultBehind: whose fault a failed libvips read is", () => {
  test("libvips' 'unsupported image format' for a good PNG it could not open is the EMFILE behind it", async () => {
    const path = join(dir, "good.png");
    writeFileSync(path, await makePng(40, 30, 3));
    const [vips, fault] = await starved(async () => {
      const err = await failureOf(sharp(path).metadata());
      return [err, await serverFaultBehind(err)];
    });
    // The trap itself: libvips blames the file.
    expect(String(vips)).toBe("Error: Input file contains unsupported image format");
    expect(isOutOfFileDescriptors(vips)).toBe(false);
    expect(isOutOfFileDescriptors(fault)).toBe(true);
    expect((fault as NodeJS.ErrnoException).code).toBe("EMFILE");
  });

  test("a damaged file's libvips error, with descriptors to spare, is the image's fault", async () => {
    const path = join(dir, "cut-header.png");
    writeFileSync(path, (await makePng(40, 30, 3)).subarray(0, 30));
    const err = await failureOf(sharp(path).metadata());
    expect(err).toBeInstanceOf(Error);
    expect(await serverFaultBehind(err)).toBeUndefined();
  });

  test("a full disk or missing descriptors named by the error itself are returned as they are", async () => {
    const full = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    const emfile = Object.assign(new Error("EMFILE: too many open files, open '/x'"), { code: "EMFILE" });
    const wrapped = new Error("本地存储写入失败", { cause: emfile });
    expect(await serverFaultBehind(full)).toBe(full);
    expect(await serverFaultBehind(emfile)).toBe(emfile);
    expect(await serverFaultBehind(wrapped)).toBe(wrapped);
  });
});

describe("an upload read from a temp file while the process is out of descriptors", () => {
  for (const exifPolicy of ["strip", "passthrough"] as ExifPolicy[]) {
    test(`exif_policy=${exifPolicy}: the EMFILE comes out, not "damaged image"; the same file reads once the limit rises`, async () => {
      // With no descriptor at all the first step to open the file meets the EMFILE (reading its
      // head); whichever step it is, the error must come out as it is. (The libvips step alone,
      // which hides it, is judged above: which step meets a shortage is a matter of timing.)
      const path = join(dir, `upload-${exifPolicy}.png`);
      const png = await makePng(40, 30, 3);
      writeFileSync(path, png);
      // Hashed while received, as every upload surface does: nothing else opens the file meanwhile.
      const received = { path, size: png.length, fileName: "a.png", sha256: new Bun.CryptoHasher("sha256").update(png).digest("hex") };
      const opts = { exifPolicy, maxPixels: 50e6, tmpDir: dir };
      const failed = await starved(async () => {
        const prepared = await prepareImage(received, opts);
        await prepared.dimensions;
        return undefined;
      }).catch((err: unknown) => err);
      expect(failed).not.toBeInstanceOf(Invalid);
      expect(isOutOfFileDescriptors(failed)).toBe(true);
      const prepared = await prepareImage(received, opts);
      expect(await prepared.dimensions).toEqual({ width: 40, height: 30 });
    });
  }

  test("a file that really is damaged is still the image's fault with descriptors to spare", async () => {
    const path = join(dir, "cut.png");
    const png = await makePng(40, 30, 3);
    writeFileSync(path, png.subarray(0, 60));
    const received = { path, size: 60, fileName: "cut.png" };
    for (const exifPolicy of ["strip", "passthrough"] as ExifPolicy[]) {
      const err = await prepareImage(received, { exifPolicy, maxPixels: 50e6, tmpDir: dir })
        .then((p) => p.dimensions)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Invalid);
      expect((err as Error).message).toBe("图片数据不完整或已损坏，无法读取（PNG）");
    }
  });
});
