/**
 * Files the data dir cannot do without, written so that a crash or power loss leaves either no
 * file or the whole file. A file written without fsync can come back empty after a crash while
 * the database (SQLite syncs its own) already relies on it: a master.key lost that way makes every
 * stored channel credential unreadable.
 */
import { chmodSync, closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";

/** fsync of a file or a directory (a directory's fsync makes the names in it durable). */
export function fsyncPathSync(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Moves a finished file into place so that a crash after this returns finds it whole under its
 * new name: its bytes synced before the rename (ext4's delayed allocation can otherwise leave a
 * renamed file empty), the directory synced after it (the name itself).
 */
export function renameDurably(from: string, to: string): void {
  fsyncPathSync(from);
  renameSync(from, to);
  fsyncPathSync(dirname(to));
}

/** `renameDurably` off the event loop, for files large enough that their sync takes a while (an S3 part). */
export async function renameDurablyAsync(from: string, to: string): Promise<void> {
  await fsyncPath(from);
  await rename(from, to);
  await fsyncPath(dirname(to));
}

/** `fsyncPathSync` off the event loop. */
export async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Creates `path` holding `data`, failing with EEXIST if it exists (as flag `wx` would), durable
 * before it returns: written and synced under a temporary name, linked into place, its directory
 * synced.
 */
export function createFileDurably(path: string, data: string, mode: number): void {
  const temp = `${path}.partial-${process.pid}`;
  const fd = openSync(temp, "w", mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    chmodSync(temp, mode); // the umask may have narrowed or the file may have existed
    linkInto(temp, path);
  } finally {
    rmSync(temp, { force: true });
  }
  fsyncPathSync(dirname(path));
}

/** A hard link, which never replaces `path`; a rename after a check where the file system has no links. */
function linkInto(temp: string, path: string): void {
  try {
    linkSync(temp, path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw err;
    if (existsSync(path)) throw Object.assign(new Error(`EEXIST: file already exists, link '${temp}' -> '${path}'`), { code: "EEXIST", path });
    renameSync(temp, path);
  }
}
