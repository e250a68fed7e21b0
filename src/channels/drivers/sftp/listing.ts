/**
 * Directory listings read one READDIR batch at a time. A server decides how long a listing is: one that never
 * answers EOF (or sends huge names, or endless nesting) must not grow Kura's memory, and a slow but steady one must
 * not be mistaken for a hung one. So each batch is its own request (the watchdog times each reply, not the whole
 * listing), entries are handed on as batches arrive (the drain's batching and heartbeat act on them), and the
 * number of entries per directory, the length of names and the depth of nesting are bounded.
 */
import type { FileEntryWithStats, SFTPWrapper } from "ssh2";
import { hasStatus, isSftpStatus, SFTP_STATUS, SftpError } from "./errors";
import { sftpOps } from "./ops";
import { keyDepth } from "../object-key";

export interface ListLimits {
  /** READDIR entries per directory; an empty batch counts as one, so endless empty answers end too. */
  entriesPerDir: number;
  /** Bytes of one name (UTF-8); POSIX file systems allow 255. */
  nameBytes: number;
  /** Directory levels below the channel's path; Kura's own keys are at most a few deep. */
  depth: number;
}

export const DEFAULT_LIST_LIMITS: ListLimits = { entriesPerDir: 1_000_000, nameBytes: 1024, depth: 32 };

function listError(dirKey: string, reason: string): SftpError {
  return new SftpError(`SFTP 列出失败: ${dirKey || "/"}: ${reason}`);
}

/** Throws when `dirKey` (a key relative to the channel's path) lies deeper than allowed. */
export function checkDepth(dirKey: string, limits: ListLimits): void {
  if (keyDepth(dirKey) > limits.depth) throw listError(dirKey, `目录层级超过 ${limits.depth} 层，已停止列出`);
}

/**
 * The entries of the open directory `handle`, batch by batch, closing the handle however the iteration ends
 * (EOF, an error, or the consumer stopping early). `dirKey` names the directory in messages.
 */
export async function* readDirectory(sftp: SFTPWrapper, handle: Buffer, dirKey: string, limits: ListLimits): AsyncGenerator<FileEntryWithStats[]> {
  let counted = 0;
  let transportLost = false;
  try {
    for (;;) {
      let batch: FileEntryWithStats[];
      try {
        batch = await sftpOps.readdirBatch(sftp, handle);
      } catch (err) {
        if (hasStatus(err, SFTP_STATUS.EOF)) return;
        transportLost = !isSftpStatus(err);
        throw err;
      }
      counted += Math.max(batch.length, 1);
      if (counted > limits.entriesPerDir) throw listError(dirKey, `目录条目超过 ${limits.entriesPerDir} 个 (服务器未结束列表)，已停止列出`);
      for (const entry of batch) {
        if (Buffer.byteLength(entry.filename) > limits.nameBytes) throw listError(dirKey, `目录中有名称超过 ${limits.nameBytes} 字节的条目，已停止列出`);
      }
      yield batch;
    }
  } finally {
    // On a lost connection a CLOSE would only wait for the watchdog; the server drops the handle with the channel.
    const closing = sftpOps.close(sftp, handle).catch(() => {});
    if (!transportLost) await closing;
  }
}
