// Where a variant render reads its original from. libvips decodes huge JPEGs and WebPs at a
// fraction of their size (shrink-on-load) and streams the file, but only when it opens the
// file itself: a 15 MB camera JPEG handed over as a Buffer cost ~200 MiB more peak memory in
// our measurements (bench/huge.ts). So a plain local file is passed by path; bytes from a
// remote or encrypted channel are kept in memory when small and spilled to a temp file when large.
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { readBlob, readCandidates, type BlobReadDeps } from "../images/read";
import type { BlobRow } from "../images/repo";

/** Above this size a fetched original goes to a temp file instead of a Buffer. */
export const SPILL_BYTES = 4 * 1024 * 1024;

export interface RenderSource {
  /** A file path (libvips opens it) or the original's bytes. */
  input: string | Buffer;
  /** Removes a spilled temp file; a no-op otherwise. */
  release(): Promise<void>;
}

const nothing = async () => {};

export async function openRenderSource(app: BlobReadDeps, blob: Pick<BlobRow, "id" | "storage_key">, spillDir: string): Promise<RenderSource> {
  const best = readCandidates(app, blob.id)[0];
  const path = best?.healthy ? localFileOf(best.driver, blob.storage_key) : null;
  if (path) return { input: path, release: nothing };

  // Failover (also when a body breaks off mid-way), read repair and error handling stay in readBlob.
  return readBlob(app, blob, async (got) => {
    if (got.size <= SPILL_BYTES) return { input: Buffer.from(await new Response(got.stream).arrayBuffer()), release: nothing };
    const spilled = join(spillDir, `render-${randomBytes(8).toString("hex")}`);
    try {
      await Bun.write(spilled, new Response(got.stream));
    } catch (err) {
      await rm(spilled, { force: true });
      throw err;
    }
    return { input: spilled, release: () => rm(spilled, { force: true }) };
  });
}

function localFileOf(driver: { localFile?(key: string): string | null } | undefined, key: string): string | null {
  try {
    return driver?.localFile?.(key) ?? null;
  } catch {
    return null; // an unreadable path is openBlob's to report (and fail over from)
  }
}
