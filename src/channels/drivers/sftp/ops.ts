/**
 * Promise wrappers over ssh2's callback SFTP API, plus the two composite
 * operations the driver needs: pipelined writes and a read-ahead stream.
 */
import type { FileEntryWithStats, OpenMode, SFTPWrapper, Stats } from "ssh2";
import { DataEndedEarlyError, operationError } from "./errors";
import { awaitedLater } from "../../../shared/awaited-later";
import { ReplyWatchdog } from "./watchdog";

/** Per channel: the watchdog that fails its requests when the server goes silent (see watchdog.ts). */
const watchdogs = new WeakMap<SFTPWrapper, ReplyWatchdog>();

/**
 * While requests are outstanding on `sftp`, some reply must come every `ms`. When none does, every
 * outstanding request fails with SftpRequestTimeoutError and `onHung` runs: the session drops the
 * connection at once, so the next call reconnects instead of waiting on a hung server.
 */
export function limitRequestTime(sftp: SFTPWrapper, ms: number, onHung: () => void): void {
  watchdogs.set(sftp, new ReplyWatchdog(ms, onHung));
}

function call<T>(sftp: SFTPWrapper, fn: (cb: (err: Error | null | undefined, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const answered = watchdogs.get(sftp)?.track(reject);
    try {
      fn((err, value) => {
        answered?.();
        if (err) reject(err);
        else resolve(value);
      });
    } catch (err) {
      // ssh2 throws synchronously for e.g. an unsupported extension.
      answered?.();
      reject(err);
    }
  });
}

export const sftpOps = {
  open: (sftp: SFTPWrapper, path: string, flags: OpenMode, mode?: number) =>
    call<Buffer>(sftp, (cb) => (mode === undefined ? sftp.open(path, flags, cb) : sftp.open(path, flags, { mode }, cb))),
  close: (sftp: SFTPWrapper, handle: Buffer) => call<void>(sftp, (cb) => sftp.close(handle, cb)),
  fstat: (sftp: SFTPWrapper, handle: Buffer) => call<Stats>(sftp, (cb) => sftp.fstat(handle, cb)),
  stat: (sftp: SFTPWrapper, path: string) => call<Stats>(sftp, (cb) => sftp.stat(path, cb)),
  mkdir: (sftp: SFTPWrapper, path: string) => call<void>(sftp, (cb) => sftp.mkdir(path, { mode: 0o755 }, cb)),
  opendir: (sftp: SFTPWrapper, path: string) => call<Buffer>(sftp, (cb) => sftp.opendir(path, cb)),
  /**
   * One READDIR on an open directory handle: the next batch of entries ("." and ".." left out), or a status
   * error with code EOF at the end. Never ssh2's readdir(path), which loops to EOF as one request.
   */
  readdirBatch: (sftp: SFTPWrapper, handle: Buffer) => call<FileEntryWithStats[]>(sftp, (cb) => sftp.readdir(handle, cb)),
  unlink: (sftp: SFTPWrapper, path: string) => call<void>(sftp, (cb) => sftp.unlink(path, cb)),
  rename: (sftp: SFTPWrapper, from: string, to: string) => call<void>(sftp, (cb) => sftp.rename(from, to, cb)),
  /** posix-rename@openssh.com: replaces `to` atomically. Rejects if the server lacks the extension. */
  posixRename: (sftp: SFTPWrapper, from: string, to: string) => call<void>(sftp, (cb) => sftp.ext_openssh_rename(from, to, cb)),
  /** fsync@openssh.com; rejects if unsupported. */
  fsync: (sftp: SFTPWrapper, handle: Buffer) => call<void>(sftp, (cb) => sftp.ext_openssh_fsync(handle, cb)),
  write: (sftp: SFTPWrapper, handle: Buffer, data: Uint8Array, position: number) =>
    call<void>(sftp, (cb) =>
      sftp.write(handle, Buffer.from(data.buffer, data.byteOffset, data.byteLength), 0, data.byteLength, position, (err) => cb(err, undefined)),
    ),
};

/** True when the server does not implement an extension ssh2 was asked to use. */
export function isUnsupportedExtension(err: unknown): boolean {
  return /does not support/i.test((err as Error)?.message ?? "");
}

const WRITE_CHUNK = 64 * 1024;

/** The upload's own source failed (e.g. size mismatch): not a server problem. `cause` is the original error. */
export class SourceReadError extends Error {
  constructor(readonly cause: unknown) {
    super("上传数据源读取失败");
    this.name = "SourceReadError";
  }
}

async function* chunksOf(source: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = source.getReader();
  try {
    for (;;) {
      let result: Awaited<ReturnType<typeof reader.read>>;
      try {
        result = await reader.read();
      } catch (err) {
        throw new SourceReadError(err);
      }
      if (result.done) return;
      yield result.value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** Writes `source` to `handle` from offset 0 with up to `depth` WRITE requests in flight. */
export async function writeAll(sftp: SFTPWrapper, handle: Buffer, source: ReadableStream<Uint8Array>, depth = 16): Promise<void> {
  const inflight = new Set<Promise<void>>();
  let failure: unknown = null;
  let position = 0;
  try {
    for await (const chunk of chunksOf(source)) {
      // Large chunks are split so they pipeline too (ssh2 would send their parts one after another).
      for (let offset = 0; offset < chunk.byteLength && !failure; offset += WRITE_CHUNK) {
        const piece = chunk.subarray(offset, offset + WRITE_CHUNK);
        const write = sftpOps.write(sftp, handle, piece, position).catch((err: unknown) => {
          failure ??= err;
        });
        position += piece.byteLength;
        inflight.add(write);
        void write.finally(() => inflight.delete(write));
        if (inflight.size >= depth) await Promise.race(inflight);
      }
      if (failure) break;
    }
  } finally {
    // Never leave WRITEs in flight behind us (the caller closes the handle next).
    await Promise.all(inflight);
  }
  if (failure) throw failure;
}

/** Reads exactly `length` bytes at `position` (SFTP may answer short reads). */
async function readExact(sftp: SFTPWrapper, handle: Buffer, position: number, length: number): Promise<Uint8Array> {
  const buffer = Buffer.allocUnsafe(length);
  let filled = 0;
  while (filled < length) {
    const got = await call<number>(sftp, (cb) => sftp.read(handle, buffer, filled, length - filled, position + filled, (err, bytesRead) => cb(err, bytesRead)));
    if (got === 0) throw new DataEndedEarlyError();
    filled += got;
  }
  return new Uint8Array(buffer.buffer, buffer.byteOffset, length);
}

const READ_CHUNK = 64 * 1024;
const READ_AHEAD = 4;

/**
 * Bytes [start, start+length) of an open file as a stream, with a few reads in
 * flight to hide the round trip. The handle is closed when the stream ends,
 * fails or is cancelled.
 */
export function readStream(sftp: SFTPWrapper, handle: Buffer, start: number, length: number, target: string): ReadableStream<Uint8Array> {
  const end = start + length;
  let next = start;
  const pending: Promise<Uint8Array>[] = [];
  let closed = false;
  const release = async () => {
    if (closed) return;
    closed = true;
    await Promise.allSettled(pending);
    await sftpOps.close(sftp, handle).catch(() => {});
  };
  const fill = () => {
    while (pending.length < READ_AHEAD && next < end) {
      const size = Math.min(READ_CHUNK, end - next);
      // Observed when its turn comes.
      pending.push(awaitedLater(readExact(sftp, handle, next, size)));
      next += size;
    }
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      fill();
      const read = pending.shift();
      if (!read) {
        await release();
        controller.close();
        return;
      }
      try {
        controller.enqueue(await read);
      } catch (err) {
        await release();
        controller.error(operationError("读取", target, err));
        return;
      }
      if (pending.length === 0 && next >= end) {
        await release();
        controller.close();
      }
    },
    async cancel() {
      await release();
    },
  });
}
