/**
 * rclone crypt file-content format.
 *
 *   header: "RCLONE\0\0" ‖ 24-byte nonce                      (32 bytes)
 *   blocks: secretbox(≤64 KiB plaintext) = 16-byte tag ‖ data (≤65 552 bytes)
 *
 * Block i uses header nonce + i, the nonce read as a 24-byte little-endian
 * integer. Blocks are independent, so any plaintext range can be served by
 * fetching the header plus the covering blocks only.
 */
import nacl from "tweetnacl";
import { randomBytes } from "node:crypto";
import type { CryptKeys } from "./crypt-keys";

export const MAGIC = Uint8Array.from([0x52, 0x43, 0x4c, 0x4f, 0x4e, 0x45, 0x00, 0x00]); // "RCLONE\0\0"
export const NONCE_SIZE = 24;
export const HEADER_SIZE = MAGIC.length + NONCE_SIZE; // 32
export const BLOCK_DATA_SIZE = 64 * 1024;
export const BLOCK_TAG_SIZE = 16;
export const BLOCK_CIPHER_SIZE = BLOCK_DATA_SIZE + BLOCK_TAG_SIZE; // 65 552

/** Inclusive plaintext byte range, same shape as the driver's ByteRange (HTTP `bytes=start-end`). */
export interface PlainRange {
  start: number;
  end?: number;
}

export class CryptRangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CryptRangeError";
  }
}

/** Cipher size for a plaintext size: 32 + plain + 16 per (possibly partial) block. */
export function encryptedSize(plainSize: number): number {
  if (!Number.isSafeInteger(plainSize) || plainSize < 0) throw new Error("明文大小无效");
  return HEADER_SIZE + plainSize + BLOCK_TAG_SIZE * Math.ceil(plainSize / BLOCK_DATA_SIZE);
}

/** Plaintext size for a cipher size; throws for sizes rclone could never have written. */
export function decryptedSize(cipherSize: number): number {
  if (!Number.isSafeInteger(cipherSize) || cipherSize < HEADER_SIZE) throw new Error("加密文件过短，不是有效的 rclone crypt 文件");
  const body = cipherSize - HEADER_SIZE;
  const rest = body % BLOCK_CIPHER_SIZE;
  if (rest > 0 && rest <= BLOCK_TAG_SIZE) throw new Error("加密文件大小无效，不是有效的 rclone crypt 文件");
  return Math.floor(body / BLOCK_CIPHER_SIZE) * BLOCK_DATA_SIZE + (rest === 0 ? 0 : rest - BLOCK_TAG_SIZE);
}

export function randomNonce(): Uint8Array {
  return Uint8Array.from(randomBytes(NONCE_SIZE));
}

/** nonce + n as 24-byte little-endian integers, wrapping at 2^192 (rclone's nonce.add). */
export function addToNonce(nonce: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(NONCE_SIZE);
  let rest = n;
  let carry = 0;
  for (let i = 0; i < NONCE_SIZE; i++) {
    const sum = nonce[i] + (rest % 256) + carry;
    out[i] = sum & 0xff;
    carry = sum >> 8;
    rest = Math.floor(rest / 256);
  }
  return out;
}

export function makeHeader(nonce: Uint8Array): Uint8Array {
  if (nonce.length !== NONCE_SIZE) throw new Error("nonce 长度必须为 24 字节");
  const header = new Uint8Array(HEADER_SIZE);
  header.set(MAGIC);
  header.set(nonce, MAGIC.length);
  return header;
}

/** Checks magic and returns the nonce of block 0. */
export function parseHeader(header: Uint8Array): Uint8Array {
  if (header.length < HEADER_SIZE) throw new Error("加密文件过短，不是有效的 rclone crypt 文件");
  for (let i = 0; i < MAGIC.length; i++) {
    if (header[i] !== MAGIC[i]) throw new Error("不是 rclone crypt 加密文件（文件头错误）");
  }
  return header.slice(MAGIC.length, HEADER_SIZE);
}

function openBlock(block: Uint8Array, nonce: Uint8Array, dataKey: Uint8Array): Uint8Array {
  if (block.length <= BLOCK_TAG_SIZE) throw new Error("加密数据被截断");
  const plain = nacl.secretbox.open(block, nonce, dataKey);
  if (!plain) throw new Error("加密数据块校验失败（数据损坏或密钥错误）");
  return plain;
}

/** Reads exact byte counts from a stream, holding at most the current source chunk. */
class ExactReader {
  private carry: Uint8Array = new Uint8Array(0);
  private ended = false;
  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  /** Up to `n` bytes; fewer only at end of stream. */
  async read(n: number): Promise<Uint8Array> {
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      if (this.carry.length === 0) {
        if (this.ended) break;
        const r = await this.reader.read();
        if (r.done) this.ended = true;
        else this.carry = r.value;
        continue;
      }
      const take = Math.min(n - filled, this.carry.length);
      out.set(this.carry.subarray(0, take), filled);
      filled += take;
      this.carry = this.carry.subarray(take);
    }
    return filled === n ? out : out.subarray(0, filled);
  }

  cancel(reason?: unknown): Promise<void> {
    return this.reader.cancel(reason);
  }
}

/**
 * Encrypts a plaintext stream into rclone's format. Pull-driven: it reads one
 * 64 KiB block from `plain` only when the consumer wants the next chunk.
 */
export function encryptStream(plain: ReadableStream<Uint8Array>, keys: CryptKeys, nonce: Uint8Array = randomNonce()): ReadableStream<Uint8Array> {
  const header = makeHeader(nonce);
  const source = new ExactReader(plain.getReader());
  let blockNonce: Uint8Array | null = null;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!blockNonce) {
          blockNonce = Uint8Array.from(nonce);
          controller.enqueue(header);
          return;
        }
        const block = await source.read(BLOCK_DATA_SIZE);
        if (block.length > 0) {
          controller.enqueue(nacl.secretbox(block, blockNonce, keys.dataKey));
          blockNonce = addToNonce(blockNonce, 1);
        }
        if (block.length < BLOCK_DATA_SIZE) controller.close();
      },
      cancel: (reason) => source.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

interface BlockWindow {
  /** Nonce of the first block in the stream. */
  nonce: Uint8Array;
  /** Plaintext bytes to drop from the start of the first block. */
  skip: number;
  /** Plaintext bytes to deliver (Infinity = all). */
  length: number;
}

/** Decrypts consecutive blocks; `window` null means "read the header from the stream first". */
function decryptBlocks(source: ExactReader, keys: CryptKeys, window: BlockWindow | null): ReadableStream<Uint8Array> {
  let state = window ? { ...window } : null;
  async function step(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    if (!state) {
      const nonce = parseHeader(await source.read(HEADER_SIZE));
      state = { nonce, skip: 0, length: Infinity };
    }
    const block = await source.read(BLOCK_CIPHER_SIZE);
    if (block.length === 0) {
      if (Number.isFinite(state.length) && state.length > 0) throw new Error("加密数据被截断");
      controller.close();
      return;
    }
    let plain = openBlock(block, state.nonce, keys.dataKey);
    state.nonce = addToNonce(state.nonce, 1);
    plain = plain.subarray(Math.min(state.skip, plain.length));
    state.skip = 0;
    if (plain.length >= state.length) {
      // Range fully served: stop without reading (or verifying) anything beyond it.
      controller.enqueue(plain.subarray(0, state.length));
      controller.close();
      await source.cancel().catch(() => {});
      return;
    }
    state.length -= plain.length;
    if (plain.length > 0) controller.enqueue(plain);
    if (block.length < BLOCK_CIPHER_SIZE) {
      if (Number.isFinite(state.length)) throw new Error("加密数据被截断");
      controller.close();
    }
  }
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          await step(controller);
        } catch (err) {
          // Release the underlying fetch/file promptly; the error itself reaches the consumer.
          await source.cancel(err).catch(() => {});
          throw err;
        }
      },
      cancel: (reason) => source.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** Decrypts a whole rclone crypt object (header included). Errors surface on read. */
export function decryptStream(cipher: ReadableStream<Uint8Array>, keys: CryptKeys): ReadableStream<Uint8Array> {
  return decryptBlocks(new ExactReader(cipher.getReader()), keys, null);
}

/** How to serve a plaintext range from a crypt object. */
export interface CipherRangePlan {
  /** The clamped plaintext range (inclusive) and the object's plaintext size. */
  plainStart: number;
  plainEnd: number;
  plainSize: number;
  /** Cipher bytes (inclusive) holding the covering blocks; the header (bytes 0..31) is needed too. */
  cipherStart: number;
  cipherEnd: number;
  /** Index of the block at `cipherStart` (its nonce is header nonce + firstBlock). */
  firstBlock: number;
  /** Plaintext bytes to drop from the first decrypted block. */
  skip: number;
  /** Plaintext bytes to deliver. */
  length: number;
}

/** Maps a plaintext range onto the cipher blocks; throws CryptRangeError when unsatisfiable. */
export function cipherRangeFor(range: PlainRange, cipherSize: number): CipherRangePlan {
  const plainSize = decryptedSize(cipherSize);
  const start = range.start;
  const end = Math.min(range.end ?? plainSize - 1, plainSize - 1);
  if (!Number.isSafeInteger(start) || start < 0 || start >= plainSize || end < start) {
    throw new CryptRangeError("请求的字节范围无法满足");
  }
  const firstBlock = Math.floor(start / BLOCK_DATA_SIZE);
  const lastBlock = Math.floor(end / BLOCK_DATA_SIZE);
  return {
    plainStart: start,
    plainEnd: end,
    plainSize,
    cipherStart: HEADER_SIZE + firstBlock * BLOCK_CIPHER_SIZE,
    cipherEnd: Math.min(cipherSize, HEADER_SIZE + (lastBlock + 1) * BLOCK_CIPHER_SIZE) - 1,
    firstBlock,
    skip: start - firstBlock * BLOCK_DATA_SIZE,
    length: end - start + 1,
  };
}

/** Decrypts the blocks fetched for `plan` (bytes plan.cipherStart..cipherEnd) given the object's 32-byte header. */
export function decryptRange(header: Uint8Array, blocks: ReadableStream<Uint8Array>, plan: CipherRangePlan, keys: CryptKeys): ReadableStream<Uint8Array> {
  const nonce = addToNonce(parseHeader(header), plan.firstBlock);
  return decryptBlocks(new ExactReader(blocks.getReader()), keys, { nonce, skip: plan.skip, length: plan.length });
}

/** Fetches cipher bytes of the stored object (inclusive range). */
export type CipherFetcher = (range: { start: number; end: number }) => Promise<ReadableStream<Uint8Array>>;

/**
 * Serves a plaintext range: one fetch when the range starts in block 0
 * (header and blocks are contiguous), otherwise header + covering blocks.
 */
export async function readPlainRange(
  fetch: CipherFetcher,
  range: PlainRange,
  cipherSize: number,
  keys: CryptKeys,
): Promise<{ plan: CipherRangePlan; stream: ReadableStream<Uint8Array> }> {
  const plan = cipherRangeFor(range, cipherSize);
  if (plan.firstBlock === 0) {
    const source = new ExactReader((await fetch({ start: 0, end: plan.cipherEnd })).getReader());
    const header = await source.read(HEADER_SIZE);
    const nonce = parseHeader(header);
    return { plan, stream: decryptBlocks(source, keys, { nonce, skip: plan.skip, length: plan.length }) };
  }
  const headerReader = new ExactReader((await fetch({ start: 0, end: HEADER_SIZE - 1 })).getReader());
  const header = await headerReader.read(HEADER_SIZE);
  await headerReader.cancel().catch(() => {});
  const blocks = await fetch({ start: plan.cipherStart, end: plan.cipherEnd });
  return { plan, stream: decryptRange(header, blocks, plan, keys) };
}

/** Whole-buffer encryption (tests, small objects). */
export function encryptBuffer(plain: Uint8Array, keys: CryptKeys, nonce: Uint8Array = randomNonce()): Uint8Array {
  const out = new Uint8Array(encryptedSize(plain.length));
  out.set(makeHeader(nonce));
  let blockNonce: Uint8Array = Uint8Array.from(nonce);
  let at = HEADER_SIZE;
  for (let off = 0; off < plain.length; off += BLOCK_DATA_SIZE) {
    const sealed = nacl.secretbox(plain.subarray(off, off + BLOCK_DATA_SIZE), blockNonce, keys.dataKey);
    out.set(sealed, at);
    at += sealed.length;
    blockNonce = addToNonce(blockNonce, 1);
  }
  return out;
}

/** Whole-buffer decryption (tests, small objects). */
export function decryptBuffer(cipher: Uint8Array, keys: CryptKeys): Uint8Array {
  let nonce = parseHeader(cipher);
  const out = new Uint8Array(decryptedSize(cipher.length));
  let at = 0;
  for (let off = HEADER_SIZE; off < cipher.length; off += BLOCK_CIPHER_SIZE) {
    const plain = openBlock(cipher.subarray(off, off + BLOCK_CIPHER_SIZE), nonce, keys.dataKey);
    out.set(plain, at);
    at += plain.length;
    nonce = addToNonce(nonce, 1);
  }
  return out;
}
