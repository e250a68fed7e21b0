import { expect } from "bun:test";
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import type { KuraServer } from "./server";
import { settled } from "./settle";

/** Files under the data directory's tmp/ that the server process still has open. */
export function openTempFiles(server: KuraServer): string[] {
  const fdDir = `/proc/${server.proc.pid}/fd`;
  const tmp = join(server.dataDir, "tmp");
  return readdirSync(fdDir)
    .map((fd) => {
      try {
        return readlinkSync(join(fdDir, fd));
      } catch {
        return "";
      }
    })
    .filter((target) => target.startsWith(tmp));
}

/**
 * Nothing of a failed upload stays: tmp/ is empty and the process holds no descriptor on anything in
 * it (an unlinked temp file whose descriptor stays open keeps its disk space until restart). Waits a
 * little, as a descriptor may close just after the answer.
 */
export async function expectNoUploadLeftovers(server: KuraServer): Promise<void> {
  const tmp = join(server.dataDir, "tmp");
  const left = await settled(
    async () => ({ files: readdirSync(tmp, { recursive: true }).map(String), open: openTempFiles(server) }),
    (v) => v.files.length === 0 && v.open.length === 0,
  );
  expect(left).toEqual({ files: [], open: [] });
}
