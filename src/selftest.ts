// `kura selftest`: proves the image stack works in this binary on this machine (the
// native addon and libvips load, and encode/decode/resize really produce pixels).
// Prints one JSON line on success; throws on any failure (the caller exits 1).
import sharp from "sharp";

const WIDTH = 640;
const HEIGHT = 480;
const TARGET_WIDTH = 320;

/** Horizontal red ramp + vertical green ramp: easy to check after lossy round trips. */
function gradient(): Buffer {
  const px = Buffer.alloc(WIDTH * HEIGHT * 3);
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < WIDTH; x++) {
      const i = (y * WIDTH + x) * 3;
      px[i] = Math.round((x / (WIDTH - 1)) * 255);
      px[i + 1] = Math.round((y / (HEIGHT - 1)) * 255);
      px[i + 2] = 128;
    }
  }
  return px;
}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Error(`自检失败：${what}`);
}

interface FormatResult {
  bytes: number;
  resized_bytes: number;
}

async function roundTrip(source: Buffer, format: "jpeg" | "webp"): Promise<FormatResult> {
  const encoded = await sharp(source, { raw: { width: WIDTH, height: HEIGHT, channels: 3 } })
    .toFormat(format, { quality: 85 })
    .toBuffer();
  const meta = await sharp(encoded).metadata();
  check(meta.format === format, `${format} 编码结果被识别为 ${meta.format}`);
  check(meta.width === WIDTH && meta.height === HEIGHT, `${format} 尺寸 ${meta.width}x${meta.height}`);

  const resized = await sharp(encoded).resize({ width: TARGET_WIDTH }).toFormat(format).toBuffer();
  const { data, info } = await sharp(resized).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const expectedHeight = (HEIGHT * TARGET_WIDTH) / WIDTH;
  check(info.width === TARGET_WIDTH && info.height === expectedHeight, `${format} 缩放后尺寸 ${info.width}x${info.height}`);
  // The gradient must survive: dark-red/green at top-left, bright at bottom-right.
  const at = (x: number, y: number, c: number) => data[(y * info.width + x) * info.channels + c]!;
  const [w, h] = [info.width - 1, info.height - 1];
  check(at(0, 0, 0) < 40 && at(w, 0, 0) > 215, `${format} 解码后水平渐变丢失`);
  check(at(0, 0, 1) < 40 && at(0, h, 1) > 215, `${format} 解码后垂直渐变丢失`);
  return { bytes: encoded.length, resized_bytes: resized.length };
}

export async function runSelftest(): Promise<void> {
  const started = performance.now();
  const source = gradient();
  const jpeg = await roundTrip(source, "jpeg");
  const webp = await roundTrip(source, "webp");
  const report = {
    ok: true,
    sharp: sharp.versions.sharp,
    vips: sharp.versions.vips,
    jpeg,
    webp,
    ms: Math.round(performance.now() - started),
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}
