import { randomBytes } from "node:crypto";
import { constants, existsSync, renameSync } from "node:fs";
import { access, lstat, mkdir, open, readdir, rm, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve, sep } from "node:path";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import { assertSafeKey, assertSafePrefix } from "./object-key";
import type { DriverOptionSpec } from "./option-spec";
import { clampRange, sizedStream } from "./sized-body";
import { fsErrorReason } from "./driver-errors";
import { hasChinese } from "../../shared/text";
import { awaitedLater } from "../../shared/awaited-later";
import { writeAll } from "../../shared/write-all";
import { fileSizeSync, fsyncPath, isDirectory, isMissing, removeEmptyTree } from "./local-fs";

/** Same key names as rclone's `local` backend: its remote is just `path`. */
export const localDriverOptions: readonly DriverOptionSpec[] = [{ key: "path", type: "text", required: true, sensitive: false }];

/** `.<name>.kura-tmp-<rand>`: hidden, next to the target so rename() stays on one filesystem. */
const TEMP_FILE = /^\..*\.kura-tmp-[0-9a-f]+$/;

/**
 * Temp files this process is writing right now. The crash-leftover cleaner skips them: its
 * age cutoff alone is not enough, because a file's mtime comes from the kernel's coarse clock
 * and can read a few ms earlier than the `Date.now()` the cutoff was taken from.
 */
const writingTemps = new Set<string>();

/**
 * The absolute directory a local channel's `path` means. A relative `path` lies under the data
 * directory: the default channel is stored as `storage`, so moving the whole data directory
 * (`./data` → `/var/lib/kura`) keeps it working. Without a data directory only absolute paths do.
 */
export function resolveLocalPath(path: string, dataDir?: string): string {
  const raw = path.trim();
  if (raw === "") throw new Error("本地存储缺少 path 配置");
  if (isAbsolute(raw)) return resolve(raw);
  if (dataDir === undefined) throw new Error("本地存储 path 必须是绝对路径（没有数据目录时不能用相对路径）");
  return resolve(dataDir, raw);
}

export function createLocalDriver(config: Record<string, string>, dataDir?: string): Driver {
  return new LocalDriver(resolveLocalPath(config.path ?? "", dataDir));
}

class LocalDriver implements Driver {
  readonly kind = "local";
  readonly stagesWrites = true;
  constructor(private readonly base: string) {}

  /** Maps a key to a file path, refusing anything that would land outside `base`. */
  private pathOf(key: string): string {
    assertSafeKey(key);
    const name = key.slice(key.lastIndexOf("/") + 1);
    if (TEMP_FILE.test(name)) throw new Error(`非法对象键 (与临时文件名冲突): ${JSON.stringify(key)}`);
    const full = resolve(this.base, key);
    if (!full.startsWith(this.base + sep)) throw new Error(`非法对象键 (越出存储目录): ${JSON.stringify(key)}`);
    return full;
  }

  /**
   * Directories a put created whose entry in the parent may not be on disk yet (its parent's
   * fsync is still running): a put into or below one of them waits for that fsync too.
   */
  private readonly unsyncedDirs = new Map<string, Promise<void>>();

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number, publishAfter?: Promise<unknown>): Promise<void> {
    const target = this.pathOf(key);
    const dir = dirname(target);
    const temp = join(dir, `.${target.slice(dir.length + 1)}.kura-tmp-${randomBytes(8).toString("hex")}`);
    if (body instanceof Uint8Array && body.byteLength !== size) throw new Error(`对象大小不符: 声明 ${size}，实际 ${body.byteLength}`);
    // A key that does not exist yet is read by nobody before the caller records it, which it
    // does only after this put resolves (an upload's key is new by construction). Its data and
    // its directory entry are then synced together after the rename: one round of fsyncs
    // instead of two in a row (~1.5 ms less per upload). A key being replaced keeps data-then-
    // rename, so a power cut can never leave a half-written file where a good one was.
    const fresh = body instanceof Uint8Array && !existsSync(target);
    // Bytes in memory are written, fsync'd and closed by one thread-pool task (Bun runs
    // writeFile with `flush` as open+write+fsync+close): with a couple of pool threads per
    // core, separate round trips queued behind other uploads' fsyncs.
    const writeTemp = () => (body instanceof Uint8Array ? writeFile(temp, body, { flag: "wx", mode: 0o644, flush: !fresh }) : writeStream(temp, body, size));
    writingTemps.add(temp);
    try {
      // A stat on the loop is far cheaper than a write that fails for want of the directory;
      // the retry covers a directory removed in between.
      if (!existsSync(dir)) await this.makeDirectory(dir);
      const written = writeTemp().catch(async (err: unknown) => {
        if (!isMissing(err)) throw err;
        await this.makeDirectory(dir);
        await writeTemp();
      });
      // The temp name is referenced by nothing and a restart removes it, so the bytes are
      // written while the caller commits what must come first (an upload's write intent);
      // only the rename that publishes `key` waits for that.
      const [wrote, allowed] = await Promise.allSettled([written, publishAfter]);
      if (wrote.status === "rejected") throw wrote.reason;
      if (allowed.status === "rejected") throw new NotPublished(allowed.reason);
      // On the loop: the temp file was just created in this directory, so the rename only
      // touches cached metadata, while a pool round trip would queue behind other fsyncs.
      renameSync(temp, target);
    } catch (err) {
      await unlink(temp).catch(() => {});
      if (err instanceof NotPublished) throw err.reason;
      throw fsFailure("写入", key, err);
    } finally {
      writingTemps.delete(temp);
    }
    try {
      // The rename is durable once the directory holding the new entry is on disk, and that
      // directory's own entry (and its parents') if a put just created them.
      await Promise.all([fsyncPath(dir), this.ancestorsDurable(dir), fresh ? fsyncPath(target) : undefined]);
    } catch (err) {
      // A fresh key nobody has recorded: better gone than left with bytes that may not be on disk.
      if (fresh) await unlink(target).catch(() => {});
      throw fsFailure("写入", key, err);
    }
  }

  /**
   * `mkdir -p` below the channel's directory, never of the directory itself: a directory that is
   * gone is most often a disk that is not mounted, and recreating it put the images on the system
   * disk under the mount point (hidden once the disk came back). Each directory created is an entry
   * in its parent, which gets an fsync.
   */
  private async makeDirectory(dir: string): Promise<void> {
    const levels: string[] = [];
    for (let d = dir; d !== this.base && d !== dirname(d); d = dirname(d)) levels.unshift(d);
    if (levels.length === 0 && !existsSync(this.base)) throw new Error(MISSING_ROOT);
    for (const d of levels) {
      try {
        await mkdir(d);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "EEXIST") continue;
        if (d === levels[0] && isMissing(err)) throw new Error(MISSING_ROOT);
        throw err;
      }
      // Awaited by the puts that need it; the failure is theirs to report.
      const synced: Promise<void> = awaitedLater(
        fsyncPath(dirname(d)).finally(() => {
          if (this.unsyncedDirs.get(d) === synced) this.unsyncedDirs.delete(d);
        }),
      );
      this.unsyncedDirs.set(d, synced);
    }
  }

  /**
   * Creates the channel's directory: only when the channel is being set up or tested (service.ts),
   * never at run time. Returns the undo: the directories this made, removed again while they hold
   * no file (a test of a path that did not exist left the whole chain behind, as root anywhere).
   */
  async createRoot(): Promise<() => Promise<void>> {
    const found = await stat(this.base).catch(() => undefined);
    if (found) return async () => {};
    const first = await mkdir(this.base, { recursive: true });
    return async () => {
      if (first) await removeEmptyTree(first);
    };
  }

  private async ancestorsDurable(dir: string): Promise<void> {
    if (this.unsyncedDirs.size === 0) return;
    const pending: Promise<void>[] = [];
    for (let d = dir; d !== dirname(d); d = dirname(d)) {
      const synced = this.unsyncedDirs.get(d);
      if (synced) pending.push(synced);
    }
    await Promise.all(pending);
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const path = this.pathOf(key);
    // A synchronous stat: on the delivery hot path a thread-pool round trip costs more than the stat itself.
    const totalSize = fileSizeSync(path);
    if (totalSize === null) throw this.missing(key);
    const file = Bun.file(path);
    if (!range) return { stream: file.stream(), size: totalSize, totalSize, file };
    const { start, end } = clampRange(range, totalSize);
    const part = file.slice(start, end + 1);
    return { stream: part.stream(), size: end + 1 - start, totalSize, file: part };
  }

  /**
   * Why `key` is not there. With the whole directory gone (an unmounted disk) that is the
   * channel's fault, not a missing object: read repair would otherwise give up every copy it
   * was asked for, and nothing would be there to copy them from once the disk is back.
   */
  private missing(key: string): Error {
    return isDirectory(this.base) ? new ObjectNotFoundError(key) : new Error(MISSING_ROOT);
  }

  localFile(key: string): string | null {
    const path = this.pathOf(key);
    return fileSizeSync(path) === null ? null : path;
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const path = this.pathOf(key);
    try {
      const info = await stat(path);
      return info.isFile() ? { key, size: info.size, modified: info.mtime } : null;
    } catch (err) {
      if (!isMissing(err)) throw fsFailure("查询", key, err);
      if (!isDirectory(this.base)) throw new Error(MISSING_ROOT);
      return null;
    }
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    try {
      await unlink(path);
    } catch (err) {
      if (!isMissing(err)) throw fsFailure("删除", key, err);
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    // Walk only the deepest directory the prefix fully names; the rest is filtered.
    const dirPart = prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/")) : "";
    // An empty listing of a directory that is gone would tell a drain the channel is empty and
    // reconciliation that every object is missing.
    if (!isDirectory(this.base)) throw new Error(MISSING_ROOT);
    try {
      for await (const info of walk(this.base, dirPart)) {
        if (info.key.startsWith(prefix)) yield info;
      }
    } catch (err) {
      throw fsFailure("列出", prefix || "/", err);
    }
  }

  async probe(deep: boolean): Promise<void> {
    try {
      // A file in the directory's place is named the same way every time: a recursive mkdir over it
      // fails with EEXIST or succeeds depending on the moment, and the alert text followed that.
      const found = await stat(this.base).catch(() => undefined);
      if (found && !found.isDirectory()) throw new Error(NOT_A_DIRECTORY);
      if (!found) throw new Error(MISSING_ROOT_REASON);
      await access(this.base, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (err) {
      // A file put in the directory's place while the probe ran fails whichever step met it (mkdir's
      // EEXIST, access's ENOTDIR): named the same way, so the alert text does not change with the moment.
      const now = await stat(this.base).catch(() => undefined);
      const reason = now && !now.isDirectory() ? NOT_A_DIRECTORY : describeFsError(err);
      throw new Error(`${UNUSABLE_ROOT}${reason}`);
    }
    if (!deep) return;
    const key = `_kura/probe/${randomBytes(8).toString("hex")}`;
    const payload = randomBytes(64);
    try {
      await this.put(key, payload, payload.byteLength);
      const got = await this.get(key);
      const back = new Uint8Array(await new Response(got.stream).arrayBuffer());
      if (!payload.equals(back)) throw new Error("读回的数据与写入不一致");
    } catch (err) {
      throw new Error(`本地存储读写检查失败：${describeFsError(err)}`);
    } finally {
      await this.delete(key).catch(() => {});
    }
  }
}

/** A streamed body to a new file, fsync'd before it is closed. */
async function writeStream(path: string, body: ReadableStream<Uint8Array>, size: number): Promise<void> {
  const handle = await open(path, "wx", 0o644);
  try {
    for await (const chunk of sizedStream(body, size)) await writeAll(handle, chunk);
    // Data must be on disk before the rename publishes it, or a crash could leave
    // a complete-looking name over empty blocks.
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Removes leftover temp files of interrupted writes under `base`; returns how many. */
export async function cleanTempFiles(base: string, olderThanMs = 0): Promise<number> {
  let removed = 0;
  const cutoff = Date.now() - olderThanMs;
  const visit = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const entry of entries) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) await visit(full);
      else if (entry.isFile() && TEMP_FILE.test(entry.name) && !writingTemps.has(full)) {
        if (olderThanMs > 0) {
          // Gone since the listing (a write in progress renamed it): nothing to clean, go on with the rest.
          const info = await lstat(full).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
          if (!info || info.mtimeMs > cutoff) continue;
        }
        await rm(full, { force: true });
        removed++;
      }
    }
  };
  try {
    await visit(resolve(base));
  } catch (err) {
    // Node's own text names the path, which lies in the channel's configured directory.
    throw new Error(`本地存储临时文件清理失败：${describeFsError(err)}`, { cause: err });
  }
  return removed;
}

async function* walk(base: string, relDir: string): AsyncGenerator<ObjectInfo> {
  let entries;
  try {
    entries = await readdir(relDir ? join(base, relDir) : base, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err) || (err as NodeJS.ErrnoException).code === "ENOTDIR") return;
    throw err;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const key = relDir ? `${relDir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      yield* walk(base, key);
    } else if (entry.isFile() && !TEMP_FILE.test(entry.name)) {
      // A file can vanish between readdir and stat (concurrent delete): skip it.
      const info = await stat(join(base, key)).catch(() => null);
      if (info) yield { key, size: info.size, modified: info.mtime };
    }
  }
}

/** A put whose `publishAfter` rejected: that reason is the caller's, reported as it is. */
class NotPublished {
  constructor(readonly reason: unknown) {}
}

/** File-system errors get a Chinese message; others (e.g. the upload source failing) pass through. */
function fsFailure(action: string, key: string, err: unknown): unknown {
  if (typeof (err as NodeJS.ErrnoException)?.code !== "string") return err;
  return new Error(`本地存储${action}失败: ${key}: ${describeFsError(err)}`, { cause: err });
}

/**
 * What a local channel's directory problems start with. The directory is the channel's `path`,
 * configuration, so it is not named (spec 6.3): the callers add the channel's name.
 */
const UNUSABLE_ROOT = "本地存储目录不可用：";
/** Why a local channel's directory is unusable when a file stands in its place. */
const NOT_A_DIRECTORY = "路径已存在且不是目录";
/** Why it is unusable when it is gone: not recreated at run time (see makeDirectory). */
const MISSING_ROOT_REASON = "目录不存在（磁盘未挂载？为免写到挂载点下的系统盘，Kura 不会自行重建它；确认后手动创建，或在控制台重新测试并保存该渠道）";
const MISSING_ROOT = `${UNUSABLE_ROOT}${MISSING_ROOT_REASON}`;

/**
 * A file-system failure in Chinese, without the path Node's own message names (it lies in the
 * channel's configured directory); Kura's own Chinese errors pass unchanged.
 */
function describeFsError(err: unknown): string {
  const known = fsErrorReason(err);
  if (known) return known;
  const code = (err as NodeJS.ErrnoException)?.code;
  if (typeof code === "string" && /^[A-Z][A-Z0-9_]{1,30}$/.test(code)) return `文件系统错误 (${code})`;
  const message = err instanceof Error ? err.message : "";
  return hasChinese(message) ? message : "文件系统错误";
}
