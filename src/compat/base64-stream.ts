// Base64 text decoded piece by piece, so a large base64 image (Chevereto's `source`) goes to disk
// as it arrives instead of being held whole. It accepts exactly what the whole-text check
// accepts (`/^[A-Za-z0-9+/]*={0,2}$/` once whitespace is removed, a length that is a multiple
// of 4, not empty) and gives the same bytes as `Buffer.from(text, "base64")`.
import { CHEVERETO_CODE, CheveretoRefusal } from "./chevereto-errors";

/** Chevereto's "Invalid base64 string" (code 120). */
export const invalidBase64 = () => new CheveretoRefusal("source 不是有效的 base64 数据或图片 URL", CHEVERETO_CODE.base64);

const DATA_CHARS = /^[A-Za-z0-9+/]*$/;

export class Base64Decoder {
  /** Characters (not whitespace) seen so far. */
  private chars = 0;
  /** Data characters that do not yet make a whole 4-character group. */
  private carry = "";
  /** `=` seen: at most 2, and only at the very end. */
  private padding = 0;

  /** The bytes of the whole groups so far; throws (invalidBase64) as soon as the text cannot be base64. */
  push(text: string): Buffer {
    const t = text.replace(/\s+/g, "");
    if (!t) return Buffer.alloc(0);
    this.chars += t.length;
    const eq = t.indexOf("=");
    const data = eq < 0 ? t : t.slice(0, eq);
    const pad = eq < 0 ? "" : t.slice(eq);
    if ((this.padding > 0 && data) || !DATA_CHARS.test(data) || !/^=*$/.test(pad)) throw invalidBase64();
    this.padding += pad.length;
    if (this.padding > 2) throw invalidBase64();
    const all = this.carry + data;
    const whole = all.length - (all.length % 4);
    this.carry = all.slice(whole);
    return Buffer.from(all.slice(0, whole), "base64");
  }

  /** The last bytes; throws (invalidBase64) when the text was empty or its length not a multiple of 4. */
  end(): Buffer {
    if (this.chars === 0 || this.chars % 4 !== 0) throw invalidBase64();
    return Buffer.from(this.carry + "=".repeat(this.padding), "base64");
  }
}

/** A `data:…;base64,` prefix, which Chevereto clients may put before the base64 text. */
export const DATA_URL_PREFIX = /^data:[^,]*;base64,/i;

/** Whole base64 text (whitespace allowed, no `data:` prefix) decoded by the same rules as a stream. */
export function decodeBase64(text: string): Buffer {
  const decoder = new Base64Decoder();
  return Buffer.concat([decoder.push(text), decoder.end()]);
}
