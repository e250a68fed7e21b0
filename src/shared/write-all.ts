import type { FileHandle } from "node:fs/promises";

/**
 * Writes all of `bytes` at the handle's position. `FileHandle.write` may write fewer bytes than
 * asked without failing (a disk that fills up mid-write does exactly that); the next write then
 * throws ENOSPC. A caller that ignored `bytesWritten` kept a truncated file and reported success.
 */
export async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let offset = 0; offset < bytes.byteLength; ) {
    offset += (await handle.write(bytes, offset, bytes.byteLength - offset)).bytesWritten;
  }
}
