import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const SHORT_ID_LENGTH = 10;

/** 10 base62 characters (~59 bits): unguessable enough that image URLs can be shared without listing. */
export function newShortId(): string {
  let out = "";
  while (out.length < SHORT_ID_LENGTH) {
    for (const b of randomBytes(16)) {
      if (b < 248 && out.length < SHORT_ID_LENGTH) out += ALPHABET[b % 62];
    }
  }
  return out;
}
