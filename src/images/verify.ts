import { createHash } from "node:crypto";

/** A channel answered with bytes that are not the blob: wrong content under the right key. */
export class ContentMismatchError extends Error {
  constructor() {
    super("存储渠道返回的数据与图片的 SHA-256 不符（数据损坏或被篡改）");
    this.name = "ContentMismatchError";
  }
}

/** A whole blob read from a channel, checked against its SHA-256 and size while it passes. */
export interface VerifiedRead {
  stream: ReadableStream<Uint8Array>;
  /** True once every byte passed and the digest matched; a writer checks it before recording a copy. */
  verified(): boolean;
}

/**
 * Every key embeds its blob's SHA-256, so a read of the whole blob can prove its bytes. The
 * chunk that completes the body is passed on only after the digest matched: a consumer that
 * stops at `size` bytes (a PUT with Content-Length, an HTTP answer with a length, a buffer)
 * gets an error instead of that last chunk and never holds a complete wrong body. A body that
 * runs past `size` errors before the extra bytes pass; one that ends short errors at its end.
 * `onMismatch` runs once when the content (not the length) is wrong.
 */
export function verifiedStream(source: ReadableStream<Uint8Array>, sha256: string, size: number, onMismatch?: () => void): VerifiedRead {
  const hash = createHash("sha256");
  let seen = 0;
  let ok = false;
  const check = () => {
    ok = hash.digest("hex") === sha256;
    if (ok) return;
    onMismatch?.();
    throw new ContentMismatchError();
  };
  const stream = source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > size) throw new Error(`存储渠道返回的数据比图片大小 ${size} 字节更长`);
        hash.update(chunk);
        if (seen === size && !ok) check();
        controller.enqueue(chunk);
      },
      flush() {
        if (seen !== size) throw new Error(`存储渠道返回的数据不完整: 应为 ${size} 字节，只收到 ${seen} 字节`);
        if (size === 0 && !ok) check();
      },
    }),
  );
  return { stream, verified: () => ok };
}
