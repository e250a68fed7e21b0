import { randomBytes } from "node:crypto";
import type { SFTPWrapper } from "ssh2";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import { directoryTarget } from "./driver-errors";
import { assertSafeKey, assertSafePrefix } from "./object-key";
import { roundTripProbe } from "./round-trip-probe";
import { clampRange, sizedStream } from "./sized-body";
import { resolveSftpSettings, type SftpSettings } from "./sftp/config";
import { hasStatus, operationError, SFTP_STATUS, SftpError } from "./sftp/errors";
import { isUnsupportedExtension, readStream, sftpOps, SourceReadError, writeAll } from "./sftp/ops";
import { checkDepth, DEFAULT_LIST_LIMITS, type ListLimits, readDirectory } from "./sftp/listing";
import { SftpSession } from "./sftp/session";

export { sftpDriverOptions } from "./sftp/config";

export interface SftpDriverOptions {
  /** Time allowed for connecting and logging in. */
  timeoutMs?: number;
  /** Bounds on what a server's listings may hold (tests lower them). */
  listLimits?: Partial<ListLimits>;
  /** The host key trusted on first use (no host_key_sha256, no known_hosts_file), to be stored as the pin. */
  onHostKey?: (fingerprint: string) => void;
}

/** `.<name>.kura-tmp-<rand>` as in the local driver: hidden, next to the target, skipped by list. */
const TEMP_FILE = /^\..*\.kura-tmp-[0-9a-f]+$/;

export function createSftpDriver(config: Record<string, string>, opts: SftpDriverOptions = {}): Driver {
  return new SftpDriver(resolveSftpSettings(config), opts.timeoutMs ?? 15_000, { ...DEFAULT_LIST_LIMITS, ...opts.listLimits }, opts.onHostKey);
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : slash === 0 ? "/" : path.slice(0, slash);
}

/**
 * Objects as files below `path` on an SFTP server. Uploads go to a temp file
 * that is renamed over the target only once complete (posix-rename@openssh.com
 * when offered: atomic replace), so readers never see a partial object.
 */
class SftpDriver implements Driver {
  readonly kind = "sftp";
  private readonly session: SftpSession;
  /** Directories known to exist, so puts skip MKDIR round trips. */
  private readonly knownDirs = new Set<string>();

  constructor(
    private readonly settings: SftpSettings,
    timeoutMs: number,
    private readonly listLimits: ListLimits,
    onHostKey?: (fingerprint: string) => void,
  ) {
    this.session = new SftpSession(settings, timeoutMs, onHostKey);
  }

  /** Remote path of a key; relative paths resolve against the login directory, as in rclone. */
  private pathOf(key: string): string {
    assertSafeKey(key);
    if (TEMP_FILE.test(key.slice(key.lastIndexOf("/") + 1))) throw new Error(`非法对象键 (与临时文件名冲突): ${JSON.stringify(key)}`);
    return this.join(key);
  }

  /**
   * How errors name a remote directory: relative to the configured `path`, as keys are. The path
   * itself is configuration and is not named (spec 6.3).
   */
  private dirTarget(dir: string): string {
    return directoryTarget(this.settings.root, dir, this.settings.root ? "path 指定的目录" : "登录目录");
  }

  private join(relative: string): string {
    const root = this.settings.root;
    if (root === "") return relative;
    if (relative === "") return root;
    return root.endsWith("/") ? root + relative : `${root}/${relative}`;
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const target = this.pathOf(key);
    const source = sizedStream(body, size);
    const cut = target.lastIndexOf("/") + 1;
    const dir = parentOf(target);
    const temp = `${target.slice(0, cut)}.${target.slice(cut)}.kura-tmp-${randomBytes(8).toString("hex")}`;
    try {
      // Opening the temp file consumes nothing, so it may be retried on a fresh connection
      // (e.g. after an idle one died); the body itself can be sent only once.
      const { sftp, handle } = await this.session.run(async (sftp) => ({ sftp, handle: await this.openTemp(sftp, dir, temp) }), true);
      let renamed = false;
      try {
        await writeAll(sftp, handle, source);
        // Data should be on disk before the rename publishes it (skipped if the server can't).
        await sftpOps.fsync(sftp, handle).catch((err: unknown) => {
          if (!isUnsupportedExtension(err) && !hasStatus(err, SFTP_STATUS.OP_UNSUPPORTED)) throw err;
        });
        await sftpOps.close(sftp, handle);
        await this.replace(sftp, temp, target);
        renamed = true;
      } finally {
        if (!renamed) {
          await sftpOps.close(sftp, handle).catch(() => {});
          await sftpOps.unlink(sftp, temp).catch(() => {});
        }
      }
    } catch (err) {
      await source.cancel().catch(() => {});
      failed("写入", key)(err);
    }
  }

  /** Opens the temp file, creating parent directories (once more if a cached one has vanished). */
  private async openTemp(sftp: SFTPWrapper, dir: string, temp: string): Promise<Buffer> {
    await this.ensureDir(sftp, dir);
    try {
      return await sftpOps.open(sftp, temp, "wx", 0o644);
    } catch (err) {
      if (!hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) throw err;
      this.knownDirs.clear();
      await this.ensureDir(sftp, dir);
      return sftpOps.open(sftp, temp, "wx", 0o644);
    }
  }

  /** Moves `temp` over `target`: atomically where the server allows, else delete + rename. */
  private async replace(sftp: SFTPWrapper, temp: string, target: string): Promise<void> {
    try {
      await sftpOps.posixRename(sftp, temp, target);
      return;
    } catch (err) {
      if (!isUnsupportedExtension(err) && !hasStatus(err, SFTP_STATUS.OP_UNSUPPORTED)) throw err;
    }
    // Plain SFTP rename refuses to overwrite; a reader may briefly see no object (never a partial one).
    try {
      await sftpOps.rename(sftp, temp, target);
    } catch {
      await sftpOps.unlink(sftp, target).catch(() => {});
      await sftpOps.rename(sftp, temp, target);
    }
  }

  /** mkdir -p: try MKDIR first (one round trip for a new dir), walk up only when the parent is missing. */
  private async ensureDir(sftp: SFTPWrapper, dir: string): Promise<void> {
    if (dir === "" || dir === "/" || this.knownDirs.has(dir)) return;
    try {
      await sftpOps.mkdir(sftp, dir);
    } catch (err) {
      if (hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) {
        await this.ensureDir(sftp, parentOf(dir));
        await sftpOps.mkdir(sftp, dir).catch(() => {});
      }
      // MKDIR of an existing directory fails with a generic status: check what is there.
      const info = await sftpOps.stat(sftp, dir).catch(() => null);
      if (!info?.isDirectory()) throw operationError("创建目录", this.dirTarget(dir), err);
    }
    this.knownDirs.add(dir);
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const path = this.pathOf(key);
    return this.session
      .run(async (sftp) => {
        let handle: Buffer;
        try {
          handle = await sftpOps.open(sftp, path, "r");
        } catch (err) {
          throw hasStatus(err, SFTP_STATUS.NO_SUCH_FILE) ? new ObjectNotFoundError(key) : err;
        }
        try {
          const info = await sftpOps.fstat(sftp, handle);
          if (!info.isFile()) throw new ObjectNotFoundError(key);
          const totalSize = info.size;
          const { start, end } = range ? clampRange(range, totalSize) : { start: 0, end: totalSize - 1 };
          const size = end + 1 - start;
          return { stream: readStream(sftp, handle, start, size, key), size, totalSize };
        } catch (err) {
          await sftpOps.close(sftp, handle).catch(() => {});
          throw err;
        }
      }, true)
      .catch(failed("读取", key));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const path = this.pathOf(key);
    return this.session
      .run(async (sftp) => {
        try {
          const info = await sftpOps.stat(sftp, path);
          return info.isFile() ? { key, size: info.size, modified: new Date(info.mtime * 1000) } : null;
        } catch (err) {
          if (hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) return null;
          throw err;
        }
      }, true)
      .catch(failed("查询", key));
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    await this.session
      .run(async (sftp) => {
        try {
          await sftpOps.unlink(sftp, path);
        } catch (err) {
          if (!hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) throw err;
        }
      }, true)
      .catch(failed("删除", key));
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    // Walk only the deepest directory the prefix fully names; the rest is filtered.
    const dirPart = prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/")) : "";
    yield* this.walk(dirPart, prefix);
  }

  private async *walk(dirKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    checkDepth(dirKey, this.listLimits);
    const dir = this.join(dirKey) || ".";
    // Opening is retried on a fresh connection like any idempotent call; the READDIRs then stay on that
    // connection (a handle means nothing on another one), so a drop mid-listing fails the listing.
    const opened = await this.session
      .run(async (sftp) => {
        try {
          return { sftp, handle: await sftpOps.opendir(sftp, dir) };
        } catch (err) {
          if (hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) return null;
          // Listing below a file: OpenSSH answers a generic failure.
          const info = await sftpOps.stat(sftp, dir).catch(() => null);
          if (info && !info.isDirectory()) return null;
          throw err;
        }
      }, true)
      .catch(failed("列出", dirKey || "/"));
    if (!opened) return;
    const batches = readDirectory(opened.sftp, opened.handle, dirKey, this.listLimits);
    // Depth first with the parent's handle open: nothing but one batch per level is held, however large a directory.
    for await (const batch of mapErrors(batches, failed("列出", dirKey || "/"))) {
      for (const entry of batch) {
        if (entry.filename === "." || entry.filename === "..") continue;
        const key = dirKey ? `${dirKey}/${entry.filename}` : entry.filename;
        if (entry.attrs.isDirectory()) {
          // Descend only where keys can still match the prefix.
          if (`${key}/`.startsWith(prefix) || prefix.startsWith(`${key}/`)) yield* this.walk(key, prefix);
        } else if (entry.attrs.isFile() && !TEMP_FILE.test(entry.filename) && key.startsWith(prefix)) {
          yield { key, size: entry.attrs.size, modified: new Date(entry.attrs.mtime * 1000) };
        }
      }
    }
  }

  async probe(deep: boolean): Promise<void> {
    // Connecting checks host, host key and login; then the base directory must be usable.
    await this.session
      .run(async (sftp) => {
        const base = this.settings.root || ".";
        const info = await sftpOps.stat(sftp, base).catch((err: unknown) => {
          if (hasStatus(err, SFTP_STATUS.NO_SUCH_FILE)) return null;
          throw err;
        });
        if (!info) await this.ensureDir(sftp, this.settings.root);
        else if (!info.isDirectory()) throw new SftpError(this.settings.root ? "SFTP path 指定的路径不是目录" : "SFTP 登录目录不是目录");
      }, true)
      .catch(failed("访问目录", this.dirTarget(this.settings.root)));
    if (deep) await roundTripProbe(this, "SFTP", SftpError);
  }

  async close(): Promise<void> {
    await this.session.close();
  }
}

/** `source` with its failures passed through `rethrow`; stopping early still ends `source` (its finally runs). */
async function* mapErrors<T>(source: AsyncGenerator<T>, rethrow: (err: unknown) => never): AsyncGenerator<T> {
  try {
    yield* source;
  } catch (err) {
    rethrow(err);
  }
}

/**
 * Rethrows a failure with a Chinese message. The caller's own errors pass
 * through: not-found, bad ranges, and a failing upload source (size mismatch…).
 */
function failed(action: string, key: string): (err: unknown) => never {
  return (err) => {
    if (err instanceof ObjectNotFoundError || err instanceof RangeError) throw err;
    if (err instanceof SourceReadError) throw err.cause;
    throw operationError(action, key, err);
  };
}
