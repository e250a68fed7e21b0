// The reference an upload is judged against: the irreducible work of accepting an image
// (read its header with sharp, hash it, make it durable on disk), done in-process with no
// HTTP, no multipart, no database. Measured in the same run, on the same disk, so the
// ratio upload/baseline is comparable across machines.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { runPool, type RunResult } from "./stats";

/** Writes the file and fsyncs it: the durability an upload must have before it is answered. */
export async function writeDurably(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, "wx", 0o644);
  try {
    let offset = 0;
    while (offset < bytes.byteLength) offset += (await handle.write(bytes, offset)).bytesWritten;
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export interface BaselineResult extends RunResult {
  /** CPU time of this process per image, in milliseconds. */
  cpuMsPerOp: number;
}

/**
 * For each image: sharp(buf).metadata(), sha256 of the bytes, write + fsync into a temp
 * dir. One pass of a few hundred images lasts well under a second on a fast disk, which
 * is too short to be stable, so passes repeat (fresh file names) until `minMs` is spent.
 */
export async function runBaseline(images: readonly Uint8Array[], concurrency: number, minMs = 0): Promise<BaselineResult> {
  const dir = mkdtempSync(join(tmpdir(), "kura-bench-baseline-"));
  const total: RunResult = { count: 0, wallMs: 0, latenciesMs: [] };
  let cpuUs = 0;
  try {
    for (let pass = 0; pass === 0 || total.wallMs < minMs; pass++) {
      const cpuStart = process.cpuUsage();
      const run = await runPool(images, concurrency, async (bytes, i) => {
        const meta = await sharp(bytes).metadata();
        if (!meta.width || !meta.height) throw new Error(`基准图片 ${i} 无法读取尺寸`);
        const sha = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
        await writeDurably(join(dir, `${pass}-${i}-${sha}.jpg`), bytes);
      });
      const cpu = process.cpuUsage(cpuStart);
      cpuUs += cpu.user + cpu.system;
      total.count += run.count;
      total.wallMs += run.wallMs;
      total.latenciesMs.push(...run.latenciesMs);
      // Keep the disk footprint to one pass; deleting is outside the timed part.
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { ...total, cpuMsPerOp: cpuUs / 1000 / total.count };
}
