// Renders one variant (resize and/or re-encode) with sharp. Pure: bytes or a file in,
// encoded bytes out; caching, single-flight and worker limits live elsewhere.
import sharp, { type Metadata, type Sharp } from "sharp";
import { setLongTimeout, type LongTimeout } from "../jobs/long-timeout";
import { displayedOrientation } from "../images/orientation";
import { isWideRgbProfile } from "./icc";
import type { DeliveryFormat } from "./negotiate";

export class ProcessingTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`图片处理超时（${timeoutMs} 毫秒）`);
    this.name = "ProcessingTimeoutError";
  }
}

export class ProcessingAbortedError extends Error {
  constructor() {
    super("图片处理已取消");
    this.name = "ProcessingAbortedError";
  }
}

export interface RenderOptions {
  /** Target width in pixels; 0 keeps the size. Never enlarges past the original width. */
  width: number;
  format: DeliveryFormat;
  quality: { webp: number; jpeg: number };
  /** `process_webp_method` (0..6), libwebp's speed/size trade-off. */
  webpMethod: number;
  /** `process_timeout_ms`; 0 or absent = no limit. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * Gets the encoded bytes of a render that finished after the deadline had already failed it
   * (libvips cannot be stopped mid-encode): the work is done, so it can still be kept.
   */
  late?: (bytes: Buffer) => void;
  /**
   * Told how such a render ended when it did not finish: `killed` when libvips' own whole-second
   * limit stopped it, otherwise the error it failed with. Nobody waits for it any more, so this is
   * the only place it can be counted or logged.
   */
  lateFailed?: (err: unknown, killed: boolean) => void;
  /**
   * Receives a promise (never rejecting) that settles when the sharp work really ends. On timeout/abort we reject at once, but libvips
   * cannot be interrupted mid-operation and keeps using a CPU until its own (whole-second)
   * timeout or the end; a worker limiter can keep the slot busy until this settles.
   */
  hold?: (work: Promise<void>) => void;
  /** A PNG's two WebP encodes at once (default) or one after the other (thread-pool.ts). */
  parallelEncodes?: boolean;
}

// AVIF has no quality setting of its own; 50 is libaom's usual sweet spot (about the
// visual quality of WebP 80). Effort 2, not sharp's default 4: measured here, 4 took 15-18x as
// long for files 5-15 % smaller (6 MP: 27 s against 1.8 s; WebP 0.8 s), so one anonymous
// `?format=avif` of a camera photo held a render slot and ~1 GiB for a minute (delivery audit
// H1). imgproxy's default AVIF speed is faster still.
const AVIF = { quality: 50, effort: 2 } as const;
/**
 * The largest AVIF Kura encodes, in output pixels (4K UHD fits). libheif's encoder needs ~30 bytes a
 * pixel: one anonymous `?format=avif` of a 36 MP photo took the server from 179 MiB to 1.3 GiB, past
 * the 600 MiB of the small-server profile (hostile-input audit). A larger one fails as a render:
 * the original is served with no-store (spec 4.5 rule 5), and the failure is remembered.
 */
export const AVIF_MAX_PIXELS = 8_300_000;

export class TooLargeToEncodeError extends Error {
  constructor(pixels: number) {
    super(`图片过大（${Math.round(pixels / 1e6)} MP），不转换为 AVIF（上限 ${AVIF_MAX_PIXELS / 1e6} MP）`);
    this.name = "TooLargeToEncodeError";
  }
}
// zlib level 6: close to 9 in size for photos at a fraction of the CPU.
const PNG_COMPRESSION = 6;
/** How many times the JS deadline libvips may still run a render that missed it (to keep it as the variant). */
const LATE_RENDER_FACTOR = 4;

/** libvips' own limit for a render under `process_timeout_ms` (whole seconds, at most an hour). */
export function lateRenderLimitSeconds(timeoutMs: number): number {
  return Math.min(3600, Math.ceil((timeoutMs * LATE_RENDER_FACTOR) / 1000));
}
const FORMATS_WITH_ANIMATION: ReadonlySet<DeliveryFormat> = new Set(["gif", "webp"]);

export function renderVariant(input: string | Buffer, opts: RenderOptions): Promise<Buffer> {
  if (opts.signal?.aborted) return Promise.reject(new ProcessingAbortedError());
  const work = render(buildPipeline(input, opts), opts);
  opts.hold?.(
    work.then(
      () => undefined,
      () => undefined,
    ),
  );
  return withDeadline(work, opts);
}

/**
 * Runs the pipeline, in Display P3 with its profile when the source carries a wide-gamut RGB profile
 * (icc.ts; GIF has no profile to carry it). The header is read from the same instance, as sharp
 * documents for a decision that depends on the input (the encoder's settings follow the source: see
 * `encode`); one it cannot read is left to the render to report.
 */
async function render(img: Sharp, opts: RenderOptions): Promise<Buffer> {
  const meta = await img.metadata().catch(() => undefined);
  if (opts.format !== "gif" && isWideRgbProfile(meta?.icc)) img.withIccProfile("p3");
  // EXIF orientation into the pixels, as a browser shows the original: the output carries no
  // metadata (privacy), so the tag that made the original display upright would be lost otherwise.
  if (meta && displayedOrientation(meta) > 1) img.autoOrient();
  if (opts.format === "avif" && meta?.width && meta.height) {
    const pixels = outputPixels(meta, opts.width);
    if (pixels > AVIF_MAX_PIXELS) throw new TooLargeToEncodeError(pixels);
  }
  if (opts.format === "webp" && meta?.format === "png") return smallerWebp(img, opts, meta);
  return encode(img, opts, meta).toBuffer();
}

/**
 * Pixels of one output frame: the width as displayed (orientations 5-8 turn the image a quarter, and
 * `w` applies after autoOrient), narrowed to `width` when smaller (never enlarged). A rotated panorama
 * read by its stored width passed the AVIF cap at a quarter of its real size.
 */
export function outputPixels(meta: Pick<Metadata, "format" | "orientation"> & { width: number; height: number }, width: number): number {
  const turned = displayedOrientation(meta) >= 5;
  const shownWidth = turned ? meta.height : meta.width;
  const shownHeight = turned ? meta.width : meta.height;
  const scale = width > 0 && width < shownWidth ? width / shownWidth : 1;
  return Math.round(shownWidth * scale) * Math.round(shownHeight * scale);
}

/**
 * A PNG source's WebP: lossless and lossy both, the smaller kept (lossless on a tie). Screenshots,
 * diagrams and pixel art, what ShareX and PicGo mostly send, are 5-20x smaller lossless than lossy
 * and keep their text and edges sharp (a 238 KB screenshot: 21.7 KB lossless, 146 KB lossy with red
 * text smeared by 4:2:0 chroma; 8-colour pixel art: 198 B against 3.9 KB); a photo kept as PNG is
 * ~10x smaller lossy (2.2 MB: 145 KB lossy, 1.56 MB lossless). Two encodes, but of one decode each
 * way and only for PNG sources (image-fidelity audit MED-3).
 */
async function smallerWebp(img: Sharp, opts: RenderOptions, meta: Metadata): Promise<Buffer> {
  const encodeLossless = () => img.clone().webp({ lossless: true, effort: opts.webpMethod }).toBuffer();
  const encodeLossy = () => encode(img.clone(), opts, meta).toBuffer(); // the lossy WebP every other source gets
  const [lossless, lossy] =
    opts.parallelEncodes === false ? [await encodeLossless(), await encodeLossy()] : await Promise.all([encodeLossless(), encodeLossy()]);
  return lossless.length <= lossy.length ? lossless : lossy;
}

/**
 * The output encoder. A PNG keeps what its source was (image-fidelity audit MED-3, LOW-4): a palette
 * of the source's bit depth (8-colour pixel art became 247 colours, 3x the bytes), 16 bits per sample,
 * grey (grey+alpha became RGBA, 6.9x the bytes).
 */
function encode(img: Sharp, opts: RenderOptions, meta: Metadata | undefined): Sharp {
  switch (opts.format) {
    case "webp":
      return img.webp({ quality: opts.quality.webp, effort: opts.webpMethod });
    case "jpeg":
      // JPEG has no alpha: composite on white instead of sharp's default black.
      return img.flatten({ background: "#ffffff" }).jpeg({ quality: opts.quality.jpeg, mozjpeg: true });
    case "png":
      return encodePng(img, meta);
    case "avif":
      return img.avif(AVIF);
    case "gif":
      // Effort 1, not 7: the re-quantisation of every frame at the default took ~11 s for a 30-frame
      // 480x360 GIF at w=320 (1.5 s at effort 1, ~11 % more bytes), and a 90-frame one never finished.
      return img.gif({ effort: 1 });
  }
}

function encodePng(img: Sharp, meta: Metadata | undefined): Sharp {
  if (meta?.isPalette) {
    const colours = 2 ** Math.min(8, Math.max(1, meta.bitsPerSample ?? 8));
    return img.png({ compressionLevel: PNG_COMPRESSION, palette: true, colours });
  }
  const grey = meta?.space === "b-w" || meta?.space === "grey16";
  if (meta?.depth === "ushort") img.toColourspace(grey ? "grey16" : "rgb16");
  else if (grey) img.toColourspace("b-w");
  return img.png({ compressionLevel: PNG_COMPRESSION });
}

function buildPipeline(input: string | Buffer, opts: RenderOptions): Sharp {
  // Animated input keeps all frames only when the output can animate; otherwise we take the
  // first frame (loading all frames would encode them stacked into one tall still image).
  // The upload already held the image to max_pixels_mp (up to 1,000 MP); sharp's own default
  // limit (268 MP) would fail every render of a larger one that the setting allowed.
  let img = sharp(input, { animated: FORMATS_WITH_ANIMATION.has(opts.format), failOn: "error", limitInputPixels: false });
  if (opts.timeoutMs && opts.timeoutMs > 0) {
    // libvips' own kill switch, whole seconds only, well past the JS deadline below: a render that
    // outlives the deadline is answered with the original but goes on to be kept (`late`). At the
    // same 15 s it killed every such render, so a slow one never got a variant and cost its 15 s again
    // every 10 minutes (image-fidelity audit MED-5). Still a bound on a runaway render, though only
    // while libvips computes pixels or encodes WebP, JPEG or PNG: libheif's AVIF encode reports no
    // progress, so the kill cannot reach it (its slot stays held until it ends, and its failure is
    // remembered, so one such image costs one slot, not one per request).
    img = img.timeout({ seconds: lateRenderLimitSeconds(opts.timeoutMs) });
  }
  if (opts.width > 0) img = img.resize({ width: opts.width, withoutEnlargement: true });
  return img;
}

function withDeadline(work: Promise<Buffer>, opts: RenderOptions): Promise<Buffer> {
  const { timeoutMs, signal } = opts;
  if (!(timeoutMs && timeoutMs > 0) && !signal) return work;
  return new Promise<Buffer>((resolve, reject) => {
    let timer: LongTimeout | undefined;
    const onAbort = () => finish(() => reject(new ProcessingAbortedError()));
    const finish = (settle: () => void) => {
      timer?.clear();
      signal?.removeEventListener("abort", onAbort);
      settle();
    };
    // process_timeout_ms may be up to 100 years: a plain setTimeout would fire after 1 ms.
    let expired = false;
    if (timeoutMs && timeoutMs > 0) {
      timer = setLongTimeout(() => {
        expired = true;
        finish(() => reject(new ProcessingTimeoutError(timeoutMs)));
      }, timeoutMs);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    work.then(
      (buf) => {
        if (expired) opts.late?.(buf);
        finish(() => resolve(buf));
      },
      (err) => {
        if (expired) opts.lateFailed?.(err, isSharpTimeout(err));
        finish(() => reject(isSharpTimeout(err) ? new ProcessingTimeoutError(timeoutMs ?? 0) : err));
      },
    );
  });
}

function isSharpTimeout(err: unknown): boolean {
  return err instanceof Error && /timeout/i.test(err.message);
}
