// Hand-built animated GIFs with an exact frame count (encoders merge or drop frames they find
// redundant, so a test that needs N frames writes them itself). Each frame is 1x1.

const HEADER = [
  ...new TextEncoder().encode("GIF89a"),
  1,
  0,
  1,
  0, // logical screen 1x1
  0x80,
  0,
  0, // global colour table of 2 entries
  0,
  0,
  0,
  255,
  255,
  255,
  // NETSCAPE2.0 application extension: loop forever
  0x21,
  0xff,
  0x0b,
  ...new TextEncoder().encode("NETSCAPE2.0"),
  3,
  1,
  0,
  0,
  0,
];

/** One 1x1 frame: graphic control (10 ms delay), image descriptor, LZW data. */
function frame(pixelData: readonly number[]): number[] {
  return [0x21, 0xf9, 4, 0, 1, 0, 0, 0, 0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, pixelData.length, ...pixelData, 0];
}

/** A valid 1x1 frame (clear code, index 0 or 1, end code) alternating colours. */
const VALID = [
  [0x44, 0x01],
  [0x4c, 0x01],
];

/**
 * An animated GIF of `frames` 1x1 frames. `garbagePixels` replaces every frame's LZW data with
 * bytes that are not a valid LZW stream: a reader that only walks the frame headers (as a
 * pre-decode check should) still counts the frames; one that decodes the pixels fails.
 */
export function animatedGif(frames: number, opts: { garbagePixels?: boolean } = {}): Uint8Array {
  const out: number[] = [...HEADER];
  for (let i = 0; i < frames; i++) out.push(...frame(opts.garbagePixels ? [0xff, 0xff, 0xff, 0xff] : VALID[i % 2]!));
  out.push(0x3b);
  return Uint8Array.from(out);
}
