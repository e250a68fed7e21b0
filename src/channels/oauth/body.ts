/**
 * Upload bodies for the OAuth backends. Like rclone, uploads are buffered one
 * chunk at a time: a chunk in memory can be sent again after a 401 (token
 * refresh) or a throttled answer, which a half-consumed stream cannot.
 */
import { sizedStream } from "../drivers/sized-body";

/** The whole body as bytes (for single-request uploads), checked against `size`. */
export async function toBytes(body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<Uint8Array> {
  if (body instanceof Uint8Array) {
    if (body.byteLength !== size) throw new Error(`对象大小不符: 声明 ${size}，实际 ${body.byteLength}`);
    return body;
  }
  return new Uint8Array(await new Response(sizedStream(body, size)).arrayBuffer());
}

/**
 * Yields `chunkSize`-byte pieces (the last may be shorter) of a body of exactly
 * `size` bytes; the size guard fails the iteration as soon as the body cannot match.
 */
export async function* chunksOf(body: ReadableStream<Uint8Array> | Uint8Array, size: number, chunkSize: number): AsyncGenerator<Uint8Array> {
  const reader = sizedStream(body, size).getReader();
  let buffer = new Uint8Array(Math.min(chunkSize, Math.max(size, 1)));
  let filled = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let offset = 0;
      while (offset < value.byteLength) {
        const take = Math.min(buffer.byteLength - filled, value.byteLength - offset);
        buffer.set(value.subarray(offset, offset + take), filled);
        filled += take;
        offset += take;
        if (filled === buffer.byteLength) {
          yield buffer;
          buffer = new Uint8Array(Math.min(chunkSize, Math.max(size, 1)));
          filled = 0;
        }
      }
    }
    if (filled > 0) yield buffer.subarray(0, filled);
  } finally {
    reader.releaseLock();
  }
}
