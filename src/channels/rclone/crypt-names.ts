/**
 * rclone crypt file-name encryption, `filename_encryption = standard`,
 * `filename_encoding = base32` (the defaults).
 *
 * One path segment: utf8 → PKCS#7 pad to 16 → EME(AES-256 name key, name tweak)
 * → base32 "extended hex" (0-9a-v), lower case, no '=' padding.
 * Deterministic: the same segment encrypts the same everywhere.
 */
import type { CryptKeys } from "./crypt-keys";
import { emeTransform } from "./eme";

const NAME_BLOCK = 16;
/** rclone refuses decoded names over 2048 bytes (the EME limit). */
const MAX_DECODED = 2048;
const BASE32HEX = "0123456789abcdefghijklmnopqrstuv";

export interface NameOptions {
  /** rclone `directory_name_encryption`; default true. When false only the last segment is encrypted. */
  directoryNameEncryption?: boolean;
}

export function base32HexEncode(bytes: Uint8Array): string {
  let out = "";
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += BASE32HEX[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1; // keep the accumulator small
  }
  if (bits > 0) out += BASE32HEX[(acc << (5 - bits)) & 31];
  return out;
}

/** Case-insensitive like rclone; '=' padding and stray characters are errors. */
export function base32HexDecode(text: string): Uint8Array {
  if (text.endsWith("=")) throw new Error("文件名 base32 编码错误：不接受 '=' 填充");
  // Go's padded decoder only accepts these final-quantum lengths (the rest cannot come from whole bytes).
  if (![0, 2, 4, 5, 7].includes(text.length % 8)) throw new Error("文件名 base32 编码错误：长度无效");
  const lower = text.toLowerCase();
  const out = new Uint8Array(Math.floor((text.length * 5) / 8));
  let acc = 0;
  let bits = 0;
  let n = 0;
  for (let i = 0; i < lower.length; i++) {
    const v = BASE32HEX.indexOf(lower[i]);
    if (v < 0) throw new Error(`文件名 base32 编码错误：第 ${i} 个字符非法`);
    acc = ((acc << 5) | v) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  return out;
}

function pkcs7Pad(data: Uint8Array): Uint8Array {
  const pad = NAME_BLOCK - (data.length % NAME_BLOCK); // always 1..16 bytes
  const out = new Uint8Array(data.length + pad);
  out.set(data);
  out.fill(pad, data.length);
  return out;
}

function pkcs7Unpad(data: Uint8Array): Uint8Array {
  if (data.length === 0 || data.length % NAME_BLOCK !== 0) throw new Error("文件名解密失败：PKCS#7 填充长度无效");
  const pad = data[data.length - 1];
  if (pad === 0 || pad > NAME_BLOCK) throw new Error("文件名解密失败：PKCS#7 填充无效");
  for (let i = data.length - pad; i < data.length; i++) {
    if (data[i] !== pad) throw new Error("文件名解密失败：PKCS#7 填充不一致");
  }
  return data.subarray(0, data.length - pad);
}

/** Encrypts one path segment; the empty segment stays empty (as in rclone). */
export function encryptSegment(keys: CryptKeys, plain: string): string {
  if (plain === "") return "";
  const padded = pkcs7Pad(new TextEncoder().encode(plain));
  return base32HexEncode(emeTransform(keys.nameKey, keys.nameTweak, padded, "encrypt"));
}

/** Decrypts one encrypted path segment; throws when it is not a valid rclone crypt name. */
export function decryptSegment(keys: CryptKeys, cipher: string): string {
  if (cipher === "") return "";
  const raw = base32HexDecode(cipher);
  if (raw.length === 0 || raw.length % NAME_BLOCK !== 0) throw new Error("文件名解密失败：长度不是 16 的倍数");
  if (raw.length > MAX_DECODED) throw new Error("文件名解密失败：名称过长");
  const plain = pkcs7Unpad(emeTransform(keys.nameKey, keys.nameTweak, raw, "decrypt"));
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(plain);
  } catch {
    throw new Error("文件名解密失败：结果不是有效的 UTF-8");
  }
}

function mapSegments(path: string, opts: NameOptions, fn: (segment: string) => string): string {
  const segments = path.split("/");
  const encryptDirs = opts.directoryNameEncryption ?? true;
  return segments.map((s, i) => (encryptDirs || i === segments.length - 1 ? fn(s) : s)).join("/");
}

/** Encrypts a '/'-separated path relative to the crypt root, segment by segment. */
export function encryptPath(keys: CryptKeys, path: string, opts: NameOptions = {}): string {
  return mapSegments(path, opts, (s) => encryptSegment(keys, s));
}

/** Inverse of `encryptPath`; throws on any segment that does not decrypt. */
export function decryptPath(keys: CryptKeys, path: string, opts: NameOptions = {}): string {
  return mapSegments(path, opts, (s) => decryptSegment(keys, s));
}
