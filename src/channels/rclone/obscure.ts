/**
 * rclone "obscure" / "reveal" for password-type config values.
 *
 * Format (rclone v1.60): base64url-no-padding( IV(16 random bytes) ‖ AES-256-CTR(fixed key, IV, utf8(plain)) ).
 * The key is public (compiled into rclone), so this only hides values from a
 * casual glance; an exported config is as sensitive as the plaintext secrets.
 */
import { createCipheriv, randomBytes } from "node:crypto";

/** rclone's built-in obscure key (fs/config/obscure/obscure.go); the same bytes are in /usr/bin/rclone. */
const OBSCURE_KEY = Buffer.from("9c935b48730a554d6bfd7c63c886a92bd390198eb8128afbf4de162b8b95f638", "hex");
const IV_SIZE = 16;

/** Go's RawURLEncoding alphabet only: '+', '/', '=' and whitespace are rejected like rclone does. */
const RAW_URL_BASE64 = /^[A-Za-z0-9_-]*$/;

function aesCtr(iv: Uint8Array, data: Uint8Array): Buffer {
  // CTR is symmetric; Node's aes-256-ctr treats the whole IV as a 128-bit big-endian counter, as Go's cipher.NewCTR does.
  const cipher = createCipheriv("aes-256-ctr", OBSCURE_KEY, iv);
  return Buffer.concat([cipher.update(data), cipher.final()]);
}

/** Obscures with a caller-chosen IV: deterministic, used to reproduce rclone vectors. */
export function obscureWithIv(plain: string, iv: Uint8Array): string {
  if (iv.length !== IV_SIZE) throw new Error(`混淆 IV 长度必须为 ${IV_SIZE} 字节`);
  const body = aesCtr(iv, new TextEncoder().encode(plain));
  return Buffer.concat([Buffer.from(iv), body]).toString("base64url");
}

/** Obscures a value the way `rclone obscure` does (fresh random IV each call). */
export function obscure(plain: string): string {
  return obscureWithIv(plain, randomBytes(IV_SIZE));
}

/** Reverses `obscure` / `rclone obscure`. Errors never include the input (it is a credential). */
export function reveal(obscured: string): string {
  // Node's base64url decoder is lenient (accepts padding, '+', '/', junk); validate first to match Go's strict decoder.
  if (!RAW_URL_BASE64.test(obscured) || obscured.length % 4 === 1) {
    throw new Error("还原混淆密码失败：base64 解码错误，该值可能未经 rclone obscure 处理");
  }
  const raw = Buffer.from(obscured, "base64url");
  if (raw.length < IV_SIZE) {
    throw new Error("还原混淆密码失败：输入过短，该值可能未经 rclone obscure 处理");
  }
  const plain = aesCtr(raw.subarray(0, IV_SIZE), raw.subarray(IV_SIZE));
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(plain);
  } catch {
    throw new Error("还原混淆密码失败：结果不是有效的 UTF-8 文本");
  }
}
