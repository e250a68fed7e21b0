/**
 * The encryption layer of an encrypted channel: every object is stored in
 * rclone's crypt format (`filename_encryption = standard`, directory names
 * encrypted too), so the exported `kura-<id>-crypt` remote reads the channel
 * with stock rclone, and objects rclone writes there are readable by Kura.
 *
 * Passwords are derived from the master key plus the channel's id and
 * created_at (spec 2.7), so they never have to be stored and two channels
 * never share keys.
 */
import { randomBytes } from "node:crypto";
import type { MasterKey } from "../config/master-key";
import { readBoundedBytes } from "../shared/bounded-read";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "./driver";
import { assertSafeKey, assertSafePrefix } from "./drivers/object-key";
import { sizedStream } from "./drivers/sized-body";
import { CryptRangeError, makeCrypt, type Crypt, type CipherRangePlan } from "./rclone/crypt";
import { BLOCK_CIPHER_SIZE, BLOCK_DATA_SIZE, HEADER_SIZE, cipherRangeFor } from "./rclone/crypt-data";
import type { ChannelRow } from "./repo";
import type { DriverWrapper } from "./registry";

export interface CryptPasswords {
  /** Plain (not obscured) rclone crypt `password`. */
  password: string;
  /** Plain (not obscured) rclone crypt `password2` (the scrypt salt). */
  password2: string;
}

/** The crypt passwords of one channel; deterministic, so an export always matches what was written. */
export function cryptPasswords(key: MasterKey, channelId: number, createdAt: string): CryptPasswords {
  return {
    password: key.derive("channel-crypt-password", channelId, createdAt).toString("base64url"),
    password2: key.derive("channel-crypt-salt", channelId, createdAt).toString("base64url"),
  };
}

/** Applied by the registry to every loaded channel: encrypted rows get the crypt layer. */
export function cryptWrapper(key: MasterKey): DriverWrapper {
  return (row: ChannelRow, driver: Driver) => (row.encrypted ? wrapEncrypted(driver, cryptPasswords(key, row.id, row.created_at)) : driver);
}

export function wrapEncrypted(inner: Driver, passwords: CryptPasswords): Driver {
  return new EncryptedDriver(inner, passwords);
}

class EncryptedDriver implements Driver {
  readonly kind: string;
  private cryptCache: Crypt | null = null;

  constructor(
    readonly inner: Driver,
    private readonly passwords: CryptPasswords,
  ) {
    this.kind = inner.kind;
  }

  /** scrypt takes tens of ms: derive on first use, not while the registry loads every channel. */
  private get crypt(): Crypt {
    this.cryptCache ??= makeCrypt(this.passwords.password, this.passwords.password2);
    return this.cryptCache;
  }

  private cipherKey(key: string): string {
    assertSafeKey(key);
    return this.crypt.encryptPath(key);
  }

  get stagesWrites(): boolean {
    return this.inner.stagesWrites === true;
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number, publishAfter?: Promise<unknown>): Promise<void> {
    const target = this.cipherKey(key);
    // The size guard runs on the plaintext so a short/long body fails here, before the inner driver commits anything.
    const plain = sizedStream(body, size);
    await this.inner.put(target, this.crypt.encryptStream(plain), this.crypt.encryptedSize(size), publishAfter);
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    try {
      return await this.getCipher(this.cipherKey(key), range);
    } catch (err) {
      // Report the key the caller knows, not its encrypted name.
      if (err instanceof ObjectNotFoundError) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  private async getCipher(target: string, range?: ByteRange): Promise<GetResult> {
    if (!range) {
      const got = await this.inner.get(target);
      const plainSize = this.plainSizeOrCancel(got);
      return { stream: this.crypt.decryptStream(got.stream), size: plainSize, totalSize: plainSize };
    }
    return this.getRange(target, range);
  }

  /**
   * Ranged read fetching only the covering blocks. The object's size is learnt
   * from the first inner response (its totalSize), so no extra HEAD is needed:
   * a range inside block 0 costs one request (header and blocks are contiguous),
   * any other range two (the 32-byte header, then the blocks).
   */
  private async getRange(target: string, range: ByteRange): Promise<GetResult> {
    const { start, end } = range;
    if (!Number.isSafeInteger(start) || start < 0 || (end !== undefined && (!Number.isSafeInteger(end) || end < start))) {
      throw new RangeError(`请求的范围无效: ${start}-${end ?? ""}`);
    }
    if (Math.floor(start / BLOCK_DATA_SIZE) === 0) {
      const cipherEnd = end === undefined ? undefined : HEADER_SIZE + (Math.floor(end / BLOCK_DATA_SIZE) + 1) * BLOCK_CIPHER_SIZE - 1;
      const got = await this.inner.get(target, { start: 0, end: cipherEnd });
      const plan = await planOrCancel(range, got);
      const { header, rest } = await splitHeader(got.stream);
      return this.planned(header, rest, plan);
    }
    const head = await this.inner.get(target, { start: 0, end: HEADER_SIZE - 1 });
    const plan = await planOrCancel(range, head);
    const { header, rest } = await splitHeader(head.stream);
    await rest.cancel().catch(() => {});
    const blocks = await this.inner.get(target, { start: plan.cipherStart, end: plan.cipherEnd });
    return this.planned(header, blocks.stream, plan);
  }

  private planned(header: Uint8Array, blocks: ReadableStream<Uint8Array>, plan: CipherRangePlan): GetResult {
    return { stream: this.crypt.decryptRange(header, blocks, plan), size: plan.length, totalSize: plan.plainSize };
  }

  private plainSizeOrCancel(got: GetResult): number {
    try {
      return this.crypt.decryptedSize(got.totalSize);
    } catch (err) {
      void got.stream.cancel().catch(() => {});
      throw err;
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const info = await this.inner.head(this.cipherKey(key));
    return info && { ...info, key, size: this.listedSize(info.size) };
  }

  async delete(key: string): Promise<void> {
    await this.inner.delete(this.cipherKey(key));
  }

  /**
   * Only whole directory segments of the prefix can be encrypted; the listing
   * walks the deepest such directory and filters the decrypted keys. Entries
   * whose names do not decrypt (foreign files, temp files of other tools) are
   * skipped silently, as rclone does.
   */
  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    const slash = prefix.lastIndexOf("/");
    const innerPrefix = slash < 0 ? "" : `${this.crypt.encryptPath(prefix.slice(0, slash))}/`;
    for await (const info of this.inner.list(innerPrefix)) {
      const key = this.plainKey(info.key);
      if (key === null || !key.startsWith(prefix)) continue;
      yield { ...info, key, size: this.listedSize(info.size) };
    }
  }

  private plainKey(cipherKey: string): string | null {
    try {
      const key = this.crypt.decryptPath(cipherKey);
      assertSafeKey(key); // a foreign name may decrypt to "..", "" or a backslash: not a Kura key
      return key;
    } catch {
      return null;
    }
  }

  /** Like rclone: an object whose size no crypt file can have is listed as 0 bytes (reading it fails). */
  private listedSize(cipherSize: number): number {
    try {
      return this.crypt.decryptedSize(cipherSize);
    } catch {
      return 0;
    }
  }

  /** The deep probe round-trips through encryption, proving keys, names and data end to end. */
  async probe(deep: boolean): Promise<void> {
    await this.inner.probe(false);
    if (!deep) return;
    const key = `_kura/probe/${randomBytes(8).toString("hex")}`;
    const payload = new Uint8Array(randomBytes(64));
    try {
      await this.put(key, payload, payload.byteLength);
      const info = await this.inner.head(this.cipherKey(key));
      if (!info || info.size !== this.crypt.encryptedSize(payload.byteLength)) {
        throw new Error("存储中的对象大小与加密格式不符");
      }
      const got = await this.get(key);
      // No more than was written: the read-back must not let the peer choose the memory it takes.
      const back = await readBoundedBytes(got.stream, payload.byteLength, () => new Error("读回的数据比写入的更长"));
      if (Buffer.compare(back, payload) !== 0) throw new Error("读回的数据与写入不一致");
    } catch (err) {
      throw new Error(`加密层读写检查失败: ${(err as Error).message}`, { cause: err });
    } finally {
      await this.delete(key).catch(() => {});
    }
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}

/** Plans the cipher range from the size the inner driver reported; unsatisfiable ranges become RangeError like the plain drivers'. */
async function planOrCancel(range: ByteRange, got: GetResult): Promise<CipherRangePlan> {
  try {
    return cipherRangeFor(range, got.totalSize);
  } catch (err) {
    await got.stream.cancel().catch(() => {});
    if (err instanceof CryptRangeError) {
      throw new RangeError(`请求的范围无效: ${range.start}-${range.end ?? ""}`);
    }
    throw err;
  }
}

/** Reads the 32-byte crypt header off a stream and returns the remainder as its own stream. */
async function splitHeader(stream: ReadableStream<Uint8Array>): Promise<{ header: Uint8Array; rest: ReadableStream<Uint8Array> }> {
  const reader = stream.getReader();
  const header = new Uint8Array(HEADER_SIZE);
  let filled = 0;
  let leftover: Uint8Array | null = null;
  while (filled < HEADER_SIZE) {
    const r = await reader.read();
    if (r.done) {
      await reader.cancel().catch(() => {});
      throw new Error("加密文件过短，不是有效的 rclone crypt 文件");
    }
    const take = Math.min(HEADER_SIZE - filled, r.value.byteLength);
    header.set(r.value.subarray(0, take), filled);
    filled += take;
    if (take < r.value.byteLength) leftover = r.value.subarray(take);
  }
  const rest = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (leftover) {
          controller.enqueue(leftover);
          leftover = null;
          return;
        }
        const r = await reader.read();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return { header, rest };
}
