/**
 * Key derivation of rclone's crypt backend.
 *
 * scrypt(utf8(password), salt, N=16384, r=8, p=1, 80 bytes) split into
 * data key (32, secretbox), name key (32, AES-256 for EME) and name tweak (16).
 * salt = utf8(password2), or rclone's built-in default salt when password2 is empty.
 */
import { scryptSync } from "node:crypto";

export interface CryptKeys {
  /** XSalsa20-Poly1305 key for file contents. */
  readonly dataKey: Uint8Array;
  /** AES-256 key for EME file-name encryption. */
  readonly nameKey: Uint8Array;
  /** EME tweak for file names. */
  readonly nameTweak: Uint8Array;
}

/** rclone's defaultSalt (backend/crypt/cipher.go), used when password2 is empty. */
export const RCLONE_DEFAULT_SALT = Uint8Array.from(Buffer.from("a80df43a8fbd0308a7cab83e581f86b1", "hex"));

const SCRYPT = { N: 16384, r: 8, p: 1 } as const;
const DATA_KEY_SIZE = 32;
const NAME_KEY_SIZE = 32;
const NAME_TWEAK_SIZE = 16;
const KEY_MATERIAL_SIZE = DATA_KEY_SIZE + NAME_KEY_SIZE + NAME_TWEAK_SIZE;

/**
 * Derives the keys from the *plain* (already revealed) passwords.
 * An empty password is refused: rclone would silently use all-zero keys, which
 * would make every "encrypted" channel readable by anyone.
 */
export function deriveCryptKeys(password: string, password2: string): CryptKeys {
  if (password.length === 0) throw new Error("加密通道密码不能为空");
  const salt = password2.length === 0 ? RCLONE_DEFAULT_SALT : new TextEncoder().encode(password2);
  // maxmem: scrypt needs 128·N·r = 16 MiB, exactly Node's default limit; give headroom so no runtime rejects it.
  const material = scryptSync(new TextEncoder().encode(password), salt, KEY_MATERIAL_SIZE, {
    ...SCRYPT,
    maxmem: 64 * 1024 * 1024,
  });
  const bytes = Uint8Array.from(material);
  return {
    dataKey: bytes.slice(0, DATA_KEY_SIZE),
    nameKey: bytes.slice(DATA_KEY_SIZE, DATA_KEY_SIZE + NAME_KEY_SIZE),
    nameTweak: bytes.slice(DATA_KEY_SIZE + NAME_KEY_SIZE),
  };
}
