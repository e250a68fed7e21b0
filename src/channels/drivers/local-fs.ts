// Small file-system steps of the local driver (local.ts), kept apart to keep that file readable.
import { statSync } from "node:fs";
import { readdir, rmdir } from "node:fs/promises";
import { join } from "node:path";

export function isDirectory(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

export function fileSizeSync(path: string): number | null {
  try {
    const info = statSync(path);
    return info.isFile() ? info.size : null;
  } catch (err) {
    if (isMissing(err)) return null;
    throw err;
  }
}

/**
 * Makes what `path` holds durable: a directory's entries (a rename into it, a new subdirectory) or a
 * file's bytes, through fs/promises: never behind a render on the libuv pool (shared/file-writable.ts).
 */
export { fsyncPath } from "../../shared/durable-file";

/** Removes `dir` and the directories below it, bottom up, as long as each is empty (rmdir, never rm -r). */
export async function removeEmptyTree(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) if (entry.isDirectory()) await removeEmptyTree(join(dir, entry.name));
  await rmdir(dir).catch(() => {});
}

export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}
