import type { ByteRange } from "../driver";

/**
 * Upload bodies arrive as a stream with a size promised by the caller. Backends
 * behave badly when the promise is broken (S3 hangs waiting for missing bytes, a
 * local file would silently be short), so every driver streams through this guard
 * which errors as soon as the byte count cannot match.
 */
export function sizedStream(body: ReadableStream<Uint8Array> | Uint8Array, size: number): ReadableStream<Uint8Array> {
  if (!Number.isSafeInteger(size) || size < 0) throw new Error(`对象大小无效: ${size}`);
  if (body instanceof Uint8Array) {
    if (body.byteLength !== size) throw new Error(`对象大小不符: 声明 ${size}，实际 ${body.byteLength}`);
    return new Blob([body as Uint8Array<ArrayBuffer>]).stream();
  }
  return heldToLength(
    body,
    size,
    () => new Error(`对象大小不符: 声明 ${size}，数据更长`),
    (seen) => new Error(`对象大小不符: 声明 ${size}，实际 ${seen}`),
  );
}

/**
 * `source` passed through while it holds at most `size` bytes: the chunk that would pass the
 * size errors with `over()` instead, and an end short of it with `short(seen)`. One guard for
 * what is sent (sizedStream) and what is received (exactLengthStream), each in its own words.
 */
function heldToLength(source: ReadableStream<Uint8Array>, size: number, over: () => Error, short: (seen: number) => Error): ReadableStream<Uint8Array> {
  let seen = 0;
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > size) throw over();
        controller.enqueue(chunk);
      },
      flush() {
        if (seen !== size) throw short(seen);
      },
    }),
  );
}

/**
 * The body to send for an upload: a byte array (or an empty body) as bytes,
 * which can be sent again after a connection failure; a non-empty stream as a
 * size-guarded stream, which can be sent only once.
 */
export async function uploadPayload(body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<ReadableStream<Uint8Array> | Uint8Array> {
  if (!(body instanceof Uint8Array) && size !== 0) return sizedStream(body, size);
  if (body instanceof Uint8Array) {
    if (body.byteLength !== size) throw new Error(`对象大小不符: 声明 ${size}，实际 ${body.byteLength}`);
    return body;
  }
  return new Uint8Array(await new Response(sizedStream(body, size)).arrayBuffer());
}

/**
 * A downloaded body that must hold exactly `size` bytes: the size a driver reports (from
 * Content-Length, Content-Range or a listing such as PROPFIND) is what every reader trusts, to
 * size a buffer, to label an answer, to decide what may be cached. A peer that sends more
 * (a chunked answer with no length, or an endless one) is cut off before the first byte past
 * `size` is passed on, and its connection cancelled; one that ends short errors at the end.
 */
export function exactLengthStream(source: ReadableStream<Uint8Array>, size: number, label: string): ReadableStream<Uint8Array> {
  return heldToLength(
    source,
    size,
    () => new Error(`${label} 返回的数据比对象大小 ${size} 字节更长`),
    (seen) => new Error(`${label} 返回的数据不完整: 应为 ${size} 字节，只收到 ${seen} 字节`),
  );
}

/** Passes through bytes [skip, skip+limit) of `source`; used when a server ignores Range. */
export function sliceStream(source: ReadableStream<Uint8Array>, skip: number, limit: number): ReadableStream<Uint8Array> {
  let offset = 0;
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const start = Math.max(0, skip - offset);
        const end = Math.min(chunk.byteLength, skip + limit - offset);
        offset += chunk.byteLength;
        if (end > start) controller.enqueue(chunk.subarray(start, end));
      },
    }),
  );
}

/** Inclusive range clamped like S3 does: an end past the object means "to the end". */
export function clampRange(range: ByteRange, totalSize: number): { start: number; end: number } {
  const last = totalSize - 1;
  const end = range.end === undefined ? last : Math.min(range.end, last);
  if (!Number.isSafeInteger(range.start) || range.start < 0 || range.start > end) {
    throw new RangeError(`请求的范围无效: ${range.start}-${range.end ?? ""} (对象大小 ${totalSize})`);
  }
  return { start: range.start, end };
}
