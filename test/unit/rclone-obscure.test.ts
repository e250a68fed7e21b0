/**
 * rclone obscure/reveal against vectors made by real rclone v1.60.1
 * (/work/shared/rclone/vectors/obscure.json).
 */
import { SHARED_DIR } from "../helpers/shared";
import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { obscure, obscureWithIv, reveal } from "../../src/channels/rclone/obscure.ts";

const VECTORS = join(SHARED_DIR, "rclone/vectors");

interface ObscureVectors {
  same_plain_three_runs: { plain: string; obscured: string[] };
  entries: { plain: string; obscured: string; iv_hex: string; plain_utf8_bytes: number }[];
  invalid_for_reveal: { input: string; rclone_error: string }[];
}
interface NameVectors {
  sets: { config: { password_plain: string; password_obscured: string; password2_plain: string; password2_obscured: string } }[];
}

const vectors: ObscureVectors = JSON.parse(readFileSync(`${VECTORS}/obscure.json`, "utf8"));
const nameVectors: NameVectors = JSON.parse(readFileSync(`${VECTORS}/crypt-names.json`, "utf8"));

describe("obscure vectors", () => {
  test.each(vectors.entries.map((e) => [e.plain, e] as const))("re-obscures %p with the vector IV byte-for-byte", (_, entry) => {
    expect(obscureWithIv(entry.plain, Buffer.from(entry.iv_hex, "hex"))).toBe(entry.obscured);
  });

  test.each(vectors.entries.map((e) => [e.obscured, e.plain] as const))("reveals %p", (obscured, plain) => {
    expect(reveal(obscured)).toBe(plain);
  });

  test("three different rclone obscure outputs of the same value all reveal to it", () => {
    const { plain, obscured } = vectors.same_plain_three_runs;
    expect(new Set(obscured).size).toBe(3);
    for (const o of obscured) expect(reveal(o)).toBe(plain);
  });

  test("reveals the obscured crypt passwords rclone wrote in its config", () => {
    let checked = 0;
    for (const { config } of nameVectors.sets) {
      expect(reveal(config.password_obscured)).toBe(config.password_plain);
      if (config.password2_obscured) {
        expect(reveal(config.password2_obscured)).toBe(config.password2_plain);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });

  test.each(vectors.invalid_for_reveal.map((v) => [v.input, v.rclone_error] as const))("rejects %p like rclone (%s)", (input, rcloneError) => {
    // Same failure class as rclone: too short after decoding vs. not raw-url base64 at all.
    expect(() => reveal(input)).toThrow(rcloneError.includes("too short") ? /还原混淆密码失败：输入过短/ : /还原混淆密码失败：base64/);
  });

  test("rejects junk characters that Node's lenient base64url decoder would skip", () => {
    const valid = vectors.entries[1].obscured;
    expect(() => reveal(`${valid.slice(0, 4)} ${valid.slice(4)}`)).toThrow();
    expect(() => reveal(`${valid}.`)).toThrow();
  });
});

describe("obscure with a random IV", () => {
  const samples = ["", "hello", "kura-vector-password", "图片存储的密码", "pässwörd 🔑 密码", "x".repeat(1000)];

  test.each(samples.map((s) => [s.slice(0, 20), s] as const))("round-trips %p with rclone's length and alphabet", (_, plain) => {
    const o = obscure(plain);
    const n = 16 + new TextEncoder().encode(plain).length;
    expect(o).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(o.length).toBe(Math.ceil((n * 4) / 3));
    expect(reveal(o)).toBe(plain);
  });

  test("uses a fresh IV per call", () => {
    const outputs = new Set(Array.from({ length: 20 }, () => obscure("same")));
    expect(outputs.size).toBe(20);
    const ivs = new Set([...outputs].map((o) => Buffer.from(o, "base64url").subarray(0, 16).toString("hex")));
    expect(ivs.size).toBe(20);
  });

  test("is not the plaintext (AES-CTR actually applied)", () => {
    const plain = "kura-vector-password";
    const body = Buffer.from(obscure(plain), "base64url").subarray(16);
    expect(body.toString("utf8")).not.toBe(plain);
  });
});
