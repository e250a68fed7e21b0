// A full-frame camera-sized JPEG (7360x4912, ~14.5 MB) for the huge-source benchmark, and a way
// to make distinct copies of it without re-encoding (so each copy is its own blob).
import { makeJpeg, type JpegSpec } from "./jpegs";

export const HUGE_PHOTO: JpegSpec = { width: 7360, height: 4912, noise: 30, quality: 90 };

export async function makeHugeJpeg(seed = 7): Promise<Uint8Array> {
  return makeJpeg(HUGE_PHOTO, seed);
}

/** The same JPEG with a COM segment right after SOI: other sha256, identical pixels. */
export function withComment(jpeg: Uint8Array, text: string): Uint8Array {
  const payload = new TextEncoder().encode(text);
  const seg = new Uint8Array(4 + payload.length);
  seg.set([0xff, 0xfe, (payload.length + 2) >> 8, (payload.length + 2) & 0xff]);
  seg.set(payload, 4);
  const out = new Uint8Array(jpeg.length + seg.length);
  out.set(jpeg.subarray(0, 2));
  out.set(seg, 2);
  out.set(jpeg.subarray(2), 2 + seg.length);
  return out;
}
