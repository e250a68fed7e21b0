/**
 * Facade over the rclone crypt layer: one object per encrypted channel, keys
 * derived once (scrypt is deliberately slow, ~tens of ms).
 *
 * Passwords here are the *plain* values; the exported rclone.conf stores them
 * obscured (see obscure.ts).
 */
import { deriveCryptKeys, type CryptKeys } from "./crypt-keys";
import { decryptPath, encryptPath, type NameOptions } from "./crypt-names";
import {
  cipherRangeFor,
  decryptRange,
  decryptStream,
  decryptedSize,
  encryptStream,
  encryptedSize,
  readPlainRange,
  type CipherFetcher,
  type CipherRangePlan,
  type PlainRange,
} from "./crypt-data";

export { obscure, reveal } from "./obscure";
export { CryptRangeError, type CipherFetcher, type CipherRangePlan, type PlainRange } from "./crypt-data";
export type { CryptKeys } from "./crypt-keys";

export interface Crypt {
  readonly keys: CryptKeys;
  /** Plain '/'-separated key → path under the crypt root, as rclone writes it. */
  encryptPath(path: string): string;
  /** Inverse of encryptPath; throws for names rclone would skip as undecryptable. */
  decryptPath(path: string): string;
  /** `nonce` only for byte-exact tests; production uses a random nonce per object. */
  encryptStream(plain: ReadableStream<Uint8Array>, nonce?: Uint8Array): ReadableStream<Uint8Array>;
  decryptStream(cipher: ReadableStream<Uint8Array>): ReadableStream<Uint8Array>;
  encryptedSize(plainSize: number): number;
  decryptedSize(cipherSize: number): number;
  /** Which cipher bytes serve a plaintext range (plus the 32-byte header). */
  cipherRangeFor(range: PlainRange, cipherSize: number): CipherRangePlan;
  /** Decrypts the blocks fetched for a plan, given the object's header. */
  decryptRange(header: Uint8Array, blocks: ReadableStream<Uint8Array>, plan: CipherRangePlan): ReadableStream<Uint8Array>;
  /** Fetches only the needed cipher bytes through `fetch` and streams the plaintext range. */
  readPlainRange(fetch: CipherFetcher, range: PlainRange, cipherSize: number): Promise<{ plan: CipherRangePlan; stream: ReadableStream<Uint8Array> }>;
}

/** `filename_encryption = standard`; `directory_name_encryption` defaults to true as in Kura's exported config. */
export function makeCrypt(password: string, password2: string, names: NameOptions = {}): Crypt {
  const keys = deriveCryptKeys(password, password2);
  return {
    keys,
    encryptPath: (path) => encryptPath(keys, path, names),
    decryptPath: (path) => decryptPath(keys, path, names),
    encryptStream: (plain, nonce) => encryptStream(plain, keys, nonce),
    decryptStream: (cipher) => decryptStream(cipher, keys),
    encryptedSize,
    decryptedSize,
    cipherRangeFor,
    decryptRange: (header, blocks, plan) => decryptRange(header, blocks, plan, keys),
    readPlainRange: (fetch, range, cipherSize) => readPlainRange(fetch, range, cipherSize, keys),
  };
}
