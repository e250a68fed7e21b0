import { crc32, deflateSync } from "node:zlib";
import sharp from "sharp";

/** Real encoded images made with sharp for the tests; `seed` varies the pixels so hashes differ. */
export async function makeJpeg(width = 64, height = 48, seed = 1, opts: { exif?: Record<string, Record<string, string>>; orientation?: number } = {}) {
  let img = sharp({ create: { width, height, channels: 3, background: { r: (seed * 53) % 256, g: (seed * 97) % 256, b: (seed * 31) % 256 } } })
    .composite([
      {
        input: Buffer.from(
          `<svg width="${width}" height="${height}"><rect x="0" y="0" width="${Math.max(1, width >> 1)}" height="${Math.max(1, height >> 2)}" fill="#fff"/></svg>`,
        ),
      },
    ])
    .jpeg({ quality: 90 });
  if (opts.exif) img = img.withExif(opts.exif);
  if (opts.orientation) img = img.withMetadata({ orientation: opts.orientation });
  return img.toBuffer();
}

export async function makePng(width = 64, height = 48, seed = 1) {
  return sharp({ create: { width, height, channels: 4, background: { r: seed % 256, g: 128, b: 200, alpha: 1 } } })
    .png()
    .toBuffer();
}

/**
 * An uncompressed PNG of random pixels: ~3 bytes a pixel, no two alike. For bodies of a given size (multipart
 * uploads, streaming): `width * height * 3` bytes plus a little.
 */
export async function noisePng(width: number, height = width): Promise<Buffer> {
  const noise = Buffer.from(crypto.getRandomValues(new Uint8Array(width * height * 3)));
  return sharp(noise, { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();
}

/** A JPEG of seeded noise: it does not compress, so 1800x1400 at quality 95 is well over 2 MiB (streamed, never kept in memory). */
export async function largeNoiseJpeg(seed: number): Promise<Buffer> {
  const raw = Buffer.alloc(1800 * 1400 * 3);
  let x = seed;
  for (let i = 0; i < raw.length; i++) raw[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
  return sharp(raw, { raw: { width: 1800, height: 1400, channels: 3 } })
    .jpeg({ quality: 95 })
    .toBuffer();
}

/** An animated image (`gif` or `webp`) with `frames` distinct frames. */
export async function makeAnimated(format: "gif" | "webp" = "gif", width = 32, height = 32, frames = 3) {
  const pages = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      sharp({ create: { width, height, channels: 3, background: { r: i * 80, g: 50, b: 100 } } })
        .png()
        .toBuffer(),
    ),
  );
  const joined = sharp(pages, { join: { animated: true } });
  return format === "gif" ? joined.gif().toBuffer() : joined.webp().toBuffer();
}

export const svgBytes = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>');
export const htmlBytes = Buffer.from("<!doctype html><html><body><script>alert(1)</script></body></html>");

export function sha256(bytes: Uint8Array | ArrayBuffer): string {
  return new Bun.CryptoHasher("sha256").update(bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes).digest("hex");
}

export function form(bytes: Uint8Array, fileName = "photo.jpg", fields: Record<string, string> = {}): FormData {
  const fd = new FormData();
  for (const [k, v] of Object.entries(fields)) fd.append(k, v);
  fd.append("file", new Blob([new Uint8Array(bytes)]), fileName);
  return fd;
}

/** One PNG chunk: length, type, data, CRC-32 over type and data. */
export function pngChunk(type: string, data: Uint8Array): Buffer {
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const out = Buffer.alloc(body.length + 8);
  out.writeUInt32BE(data.length, 0);
  body.copy(out, 4);
  out.writeUInt32BE(crc32(body), body.length + 4);
  return out;
}

/** The chunks of a PNG file after its signature, in order. */
function pngChunks(png: Buffer): { type: string; data: Buffer }[] {
  const chunks = [];
  for (let off = 8; off + 8 <= png.length; ) {
    const length = png.readUInt32BE(off);
    chunks.push({ type: png.toString("ascii", off + 4, off + 8), data: png.subarray(off + 8, off + 8 + length) });
    off += 12 + length;
  }
  return chunks;
}

/**
 * An animated PNG (APNG) of `frames` distinct frames, each shown `delayMs`, played `plays` times (0 = forever),
 * assembled by hand from frames sharp encodes (libvips writes no APNG): acTL, then fcTL + IDAT for the default
 * image and fcTL + fdAT for each further frame, one sequence number across them.
 */
export async function makeApng(width = 40, height = 30, frames = 3, delayMs = 100, plays = 0): Promise<Buffer> {
  const encoded = await Promise.all(
    Array.from({ length: frames }, (_, i) =>
      sharp({ create: { width, height, channels: 3, background: { r: (i * 90) % 256, g: 40, b: 200 - i * 50 } } })
        .png()
        .toBuffer(),
    ),
  );
  const parts = encoded.map((png) => pngChunks(png));
  let sequence = 0;
  const frameControl = () => {
    const fc = Buffer.alloc(26);
    fc.writeUInt32BE(sequence++, 0);
    fc.writeUInt32BE(width, 4);
    fc.writeUInt32BE(height, 8);
    fc.writeUInt16BE(delayMs, 20);
    fc.writeUInt16BE(1000, 22);
    return pngChunk("fcTL", fc);
  };
  const control = Buffer.alloc(8);
  control.writeUInt32BE(frames, 0);
  control.writeUInt32BE(plays, 4);
  const out = [encoded[0]!.subarray(0, 8), pngChunk("IHDR", parts[0]!.find((c) => c.type === "IHDR")!.data), pngChunk("acTL", control)];
  for (const [i, chunks] of parts.entries()) {
    out.push(frameControl());
    for (const { data } of chunks.filter((c) => c.type === "IDAT")) {
      if (i === 0) out.push(pngChunk("IDAT", data));
      else {
        const seq = Buffer.alloc(4);
        seq.writeUInt32BE(sequence++, 0);
        out.push(pngChunk("fdAT", Buffer.concat([seq, data])));
      }
    }
  }
  out.push(pngChunk("IEND", new Uint8Array(0)));
  return Buffer.concat(out);
}

/**
 * A black bilevel (1-bit grayscale) PNG of any size, written by hand: a few KB of deflated zero
 * rows, so a 269-megapixel image costs the test ~50 ms to make and sharp ~0.3 s to shrink.
 */
export function bilevelPng(width: number, height: number): Buffer {
  const chunk = pngChunk;
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 1; // bit depth; colour type 0 (grayscale), no interlace
  // Each row: filter byte 0, then width bits.
  const rows = Buffer.alloc(height * (Math.ceil(width / 8) + 1));
  const signature = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([signature, chunk("IHDR", header), chunk("IDAT", deflateSync(rows, { level: 9 })), chunk("IEND", new Uint8Array())]);
}
