/**
 * Integrity of a single-part PUT. A streamed upload goes out as `UNSIGNED-PAYLOAD` (hashing it
 * first would mean buffering it), so nothing in the signature ties the stored object to our
 * bytes. Two checks close that, as rclone does:
 * - when the bytes are known up front, `Content-MD5`, which S3 and its clones verify (400 BadDigest);
 * - always, the ETag of the answer, which for a single-part object is the hex MD5 of what the
 *   peer stored, compared with the MD5 of what we sent (for a stream, known only once it was sent).
 */

/** `Content-MD5` for `bytes` (base64 of the binary digest). */
export function contentMd5(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("md5").update(bytes).digest("base64");
}

export function md5Hex(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("md5").update(bytes).digest("hex");
}

/** The stream unchanged; `digest()` is its hex MD5 once exactly `size` bytes passed, else undefined. */
export function md5Tap(source: ReadableStream<Uint8Array>, size: number): { stream: ReadableStream<Uint8Array>; digest(): string | undefined } {
  const hasher = new Bun.CryptoHasher("md5");
  let seen = 0;
  const stream = source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        hasher.update(chunk);
        seen += chunk.byteLength;
        controller.enqueue(chunk);
      },
    }),
  );
  // fetch may stop pulling after Content-Length bytes without reading the end, so no flush() here.
  return { stream, digest: () => (seen === size ? hasher.copy().digest("hex") : undefined) };
}

export class UploadMismatchError extends Error {
  constructor(why: string) {
    super(`S3 上传校验失败：${why}`);
    this.name = "UploadMismatchError";
  }
}

/**
 * Throws when the answer's ETag is an MD5 other than `md5`. Not every ETag is an MD5: multipart
 * ETags carry `-N`, some providers use their own hash (Qiniu), and AWS's ETag of an object
 * encrypted with SSE-KMS or SSE-C is not its MD5; those are left unchecked.
 */
export function assertEtagMatches(response: Response, md5: string | undefined): void {
  if (md5 === undefined) throw new UploadMismatchError("服务器在数据发送完之前已应答");
  const etag = (response.headers.get("etag") ?? "").replace(/^W\//, "").replace(/"/g, "").trim().toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(etag)) return;
  const sse = (response.headers.get("x-amz-server-side-encryption") ?? "").toLowerCase();
  if (sse.startsWith("aws:kms") || response.headers.has("x-amz-server-side-encryption-customer-algorithm")) return;
  if (etag !== md5) throw new UploadMismatchError("服务器保存的数据与发送的不一致（ETag 与 MD5 不符）");
}
