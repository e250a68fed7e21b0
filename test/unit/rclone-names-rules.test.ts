// rclone's own encodings refused where rclone refuses them, each with its own message: base32hex
// names (padding, lengths no whole bytes make, stray characters), PKCS#7 padding that does not
// check out after EME, names past rclone's 2048-byte limit, results that are not UTF-8, EME's input
// bounds, obscured values that Go's strict base64 would not decode. Valid inputs round-trip; the
// encoder agrees with a bit-by-bit reference on any bytes.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { deriveCryptKeys } from "../../src/channels/rclone/crypt-keys";
import { base32HexDecode, base32HexEncode, decryptSegment, encryptSegment } from "../../src/channels/rclone/crypt-names";
import { emeTransform } from "../../src/channels/rclone/eme";
import { obscureWithIv, reveal } from "../../src/channels/rclone/obscure";

const keys = deriveCryptKeys("names-rules", "salt");

/** base32 "extended hex" the slow way: the bits as text, 5 at a time, the last group padded with zeros. */
function referenceBase32Hex(bytes: Uint8Array): string {
  const bits = [...bytes].map((b) => b.toString(2).padStart(8, "0")).join("");
  let out = "";
  for (let i = 0; i < bits.length; i += 5) out += "0123456789abcdefghijklmnopqrstuv"[Number.parseInt(bits.slice(i, i + 5).padEnd(5, "0"), 2)];
  return out;
}

/** A name whose decrypted block is `plain` exactly (padding included, valid or not). */
const cipherOf = (plain: number[]) => base32HexEncode(emeTransform(keys.nameKey, keys.nameTweak, Uint8Array.from(plain), "encrypt"));
const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (err) {
    return (err as Error).message;
  }
  return "no refusal";
};

describe("base32hex", () => {
  test("the encoder agrees with the bit-by-bit reference and the decoder inverts it", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const text = base32HexEncode(bytes);
        expect(text).toBe(referenceBase32Hex(bytes));
        expect([...base32HexDecode(text)]).toEqual([...bytes]);
        expect([...base32HexDecode(text.toUpperCase())]).toEqual([...bytes]);
      }),
      { seed: 20261129, numRuns: 500 },
    );
  });

  test("padding, impossible lengths and stray characters are refused", () => {
    expect(refusal(() => base32HexDecode("0000000="))).toBe("文件名 base32 编码错误：不接受 '=' 填充");
    expect(refusal(() => base32HexDecode("=0"))).toBe("文件名 base32 编码错误：第 0 个字符非法");
    for (const length of [1, 3, 6, 9]) expect(refusal(() => base32HexDecode("0".repeat(length)))).toBe("文件名 base32 编码错误：长度无效");
    for (const length of [2, 4, 5, 7, 8]) expect(base32HexDecode("0".repeat(length)).length).toBe(Math.floor((length * 5) / 8));
    expect(refusal(() => base32HexDecode("00w0"))).toBe("文件名 base32 编码错误：第 2 个字符非法");
    expect(refusal(() => base32HexDecode("0000000!"))).toBe("文件名 base32 编码错误：第 7 个字符非法");
  });
});

describe("decryptSegment", () => {
  const pad = (bytes: number[]) => [...bytes, ...Array(16 - (bytes.length % 16)).fill(16 - (bytes.length % 16))];

  test("a valid block decrypts, a whole block of padding to the empty name", () => {
    expect(decryptSegment(keys, cipherOf(pad([0x61, 0x62])))).toBe("ab");
    expect(decryptSegment(keys, cipherOf(Array(16).fill(16)))).toBe("");
  });

  test("padding that does not check out is refused", () => {
    const head = Array.from({ length: 13 }, (_, i) => 0x61 + i);
    expect(refusal(() => decryptSegment(keys, cipherOf([...head, 0x61, 0x61, 0])))).toBe("文件名解密失败：PKCS#7 填充无效");
    expect(refusal(() => decryptSegment(keys, cipherOf([...head, 0x61, 0x61, 17])))).toBe("文件名解密失败：PKCS#7 填充无效");
    // The first padding byte differs: every byte of the padding is checked, from the first.
    expect(refusal(() => decryptSegment(keys, cipherOf([...head, 2, 3, 3])))).toBe("文件名解密失败：PKCS#7 填充不一致");
    expect(refusal(() => decryptSegment(keys, cipherOf([...head.slice(1), 9, 4, 4, 4])))).toBe("文件名解密失败：PKCS#7 填充不一致");
    expect(refusal(() => decryptSegment(keys, cipherOf([...head, 3, 3, 3])))).toBe("no refusal");
  });

  test("a result that is not UTF-8, or a length that is no whole block, is refused", () => {
    expect(refusal(() => decryptSegment(keys, cipherOf(pad([0x61, 0xff]))))).toBe("文件名解密失败：结果不是有效的 UTF-8");
    expect(refusal(() => decryptSegment(keys, base32HexEncode(new Uint8Array(15))))).toBe("文件名解密失败：长度不是 16 的倍数");
    expect(refusal(() => decryptSegment(keys, base32HexEncode(new Uint8Array(17))))).toBe("文件名解密失败：长度不是 16 的倍数");
  });

  test("2048 encrypted bytes at most, as rclone", () => {
    const longest = "n".repeat(2047); // padded to 2048
    expect(decryptSegment(keys, encryptSegment(keys, longest))).toBe(longest);
    expect(refusal(() => encryptSegment(keys, "n".repeat(2048)))).toBe("EME 数据长度必须在 16 到 2048 字节之间");
    expect(refusal(() => decryptSegment(keys, base32HexEncode(new Uint8Array(2064))))).toBe("文件名解密失败：名称过长");
  });
});

describe("EME input bounds", () => {
  const block = new Uint8Array(16);
  test("key, tweak and data sizes", () => {
    expect(refusal(() => emeTransform(new Uint8Array(31), block, block, "encrypt"))).toBe("EME 密钥长度必须为 32 字节");
    expect(refusal(() => emeTransform(keys.nameKey, new Uint8Array(15), block, "encrypt"))).toBe("EME tweak 长度必须为 16 字节");
    expect(refusal(() => emeTransform(keys.nameKey, block, new Uint8Array(24), "encrypt"))).toBe("EME 数据长度必须是 16 的倍数");
    expect(refusal(() => emeTransform(keys.nameKey, block, new Uint8Array(0), "encrypt"))).toBe("EME 数据长度必须在 16 到 2048 字节之间");
    expect(refusal(() => emeTransform(keys.nameKey, block, new Uint8Array(2064), "decrypt"))).toBe("EME 数据长度必须在 16 到 2048 字节之间");
    const full = emeTransform(keys.nameKey, block, new Uint8Array(2048), "encrypt");
    expect([...emeTransform(keys.nameKey, block, full, "decrypt")]).toEqual([...new Uint8Array(2048)]);
  });
});

describe("obscure", () => {
  const iv = Uint8Array.from({ length: 16 }, (_, i) => i);
  test("an IV of another length is refused", () => {
    expect(refusal(() => obscureWithIv("x", iv.subarray(1)))).toBe("混淆 IV 长度必须为 16 字节");
    expect(refusal(() => obscureWithIv("x", new Uint8Array(17)))).toBe("混淆 IV 长度必须为 16 字节");
  });

  test("a length Go's strict base64 cannot decode is refused, the others read", () => {
    expect(reveal(obscureWithIv("secret", iv))).toBe("secret"); // 22 bytes: 30 characters
    expect(reveal(obscureWithIv("secret!", iv))).toBe("secret!"); // 23 bytes: 31 characters, 3 past a quantum
    // 25 characters: one past a whole quantum, which no byte count encodes to.
    expect(refusal(() => reveal("A".repeat(25)))).toBe("还原混淆密码失败：base64 解码错误，该值可能未经 rclone obscure 处理");
    expect(refusal(() => reveal("A".repeat(24)))).toBe("还原混淆密码失败：结果不是有效的 UTF-8 文本"); // decoded, then judged
  });

  test("a value that reveals to bytes that are not UTF-8 is refused", () => {
    const raw = Buffer.from(obscureWithIv("\u0000", iv), "base64url");
    raw[raw.length - 1]! ^= 0xff; // the plain byte becomes 0xff
    expect(refusal(() => reveal(raw.toString("base64url")))).toBe("还原混淆密码失败：结果不是有效的 UTF-8 文本");
  });
});
