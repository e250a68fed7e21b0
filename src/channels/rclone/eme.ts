/**
 * EME (ECB-Mix-ECB, Halevi–Rogaway) wide-block encryption over AES, as used by
 * rclone's crypt for file names (github.com/rfjakob/eme). Every output bit
 * depends on every input bit, so equal name prefixes do not leak.
 *
 * The per-block AES calls of each ECB layer are independent, so each layer is
 * done with a single node:crypto ECB call over all blocks.
 */
import { createCipheriv, createDecipheriv } from "node:crypto";

const BLOCK = 16;
/** rfjakob/eme accepts 1..128 blocks (2048 bytes). */
const MAX_BLOCKS = 128;

export type EmeDirection = "encrypt" | "decrypt";

/** AES-256-ECB over whole blocks, no padding. */
function aesEcb(key: Uint8Array, data: Uint8Array, direction: EmeDirection): Uint8Array {
  const c = direction === "encrypt" ? createCipheriv("aes-256-ecb", key, null) : createDecipheriv("aes-256-ecb", key, null);
  c.setAutoPadding(false);
  return Uint8Array.from(Buffer.concat([c.update(data), c.final()]));
}

/** Multiplication by x in GF(2^128), bytes read as a little-endian number (as rfjakob/eme does). */
function mulByTwo(input: Uint8Array): Uint8Array {
  const out = new Uint8Array(BLOCK);
  out[0] = (input[0] << 1) & 0xff;
  if (input[15] & 0x80) out[0] ^= 0x87;
  for (let j = 1; j < BLOCK; j++) out[j] = ((input[j] << 1) & 0xff) | (input[j - 1] >> 7);
  return out;
}

function xorInto(target: Uint8Array, a: Uint8Array): void {
  for (let i = 0; i < BLOCK; i++) target[i] ^= a[i];
}

/** L_j = 2^(j+1) · E(0) for every block j; always made with AES *encryption*. */
function lTable(key: Uint8Array, blocks: number): Uint8Array[] {
  let li = aesEcb(key, new Uint8Array(BLOCK), "encrypt");
  const table: Uint8Array[] = [];
  for (let j = 0; j < blocks; j++) {
    li = mulByTwo(li);
    table.push(li);
  }
  return table;
}

/** Encrypts or decrypts `data` (1..128 whole 16-byte blocks) with AES-256 `key` and a 16-byte `tweak`. */
export function emeTransform(key: Uint8Array, tweak: Uint8Array, data: Uint8Array, direction: EmeDirection): Uint8Array {
  if (key.length !== 32) throw new Error("EME 密钥长度必须为 32 字节");
  if (tweak.length !== BLOCK) throw new Error("EME tweak 长度必须为 16 字节");
  if (data.length % BLOCK !== 0) throw new Error("EME 数据长度必须是 16 的倍数");
  const m = data.length / BLOCK;
  if (m === 0 || m > MAX_BLOCKS) throw new Error("EME 数据长度必须在 16 到 2048 字节之间");

  const L = lTable(key, m);
  const block = (buf: Uint8Array, j: number) => buf.subarray(j * BLOCK, (j + 1) * BLOCK);

  // First ECB layer: PPP_j = E(P_j ⊕ L_j).
  const masked = Uint8Array.from(data);
  for (let j = 0; j < m; j++) xorInto(block(masked, j), L[j]);
  const c = aesEcb(key, masked, direction);

  // Mixing layer: MP = T ⊕ ⨁PPP_j; MC = E(MP); M = MP ⊕ MC.
  const mp = Uint8Array.from(tweak);
  for (let j = 0; j < m; j++) xorInto(mp, block(c, j));
  const mc = aesEcb(key, mp, direction);
  let M: Uint8Array = Uint8Array.from(mp);
  xorInto(M, mc);

  // CCC_j = PPP_j ⊕ 2^j·M for j ≥ 1; CCC_0 = MC ⊕ T ⊕ ⨁_{j≥1} CCC_j.
  for (let j = 1; j < m; j++) {
    M = mulByTwo(M);
    xorInto(block(c, j), M);
  }
  const ccc0 = Uint8Array.from(mc);
  xorInto(ccc0, tweak);
  for (let j = 1; j < m; j++) xorInto(ccc0, block(c, j));
  c.set(ccc0, 0);

  // Second ECB layer: C_j = E(CCC_j) ⊕ L_j.
  const out = aesEcb(key, c, direction);
  for (let j = 0; j < m; j++) xorInto(block(out, j), L[j]);
  return out;
}
