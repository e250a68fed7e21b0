// Cold variants: the first request for a width that is not cached yet, against the same
// resize + WebP encode done in this process. Requests are sequential (one at a time), so the
// latency is that of one render, not of a queue.
import sharp from "sharp";
import { renderVariant } from "../../src/delivery/transform";
import { ownCpuMs } from "./machine";
import type { BenchServer } from "./server";

export interface WebpSettings {
  quality: number;
  effort: number;
  timeoutMs: number;
}

export interface ColdSeries {
  latenciesMs: number[];
  cpuMs: number;
  wallMs: number;
}

export interface ColdResult {
  /** Raw sharp: resize(withoutEnlargement) + webp(quality, effort), nothing else. */
  sharp: ColdSeries;
  /** Kura's own renderVariant (autoOrient, failOn, timeout) called in-process. */
  render: ColdSeries;
  /** GET /i/{id}?w=W with Accept: image/webp against the server, variant not cached. */
  kura: ColdSeries;
  /** Widths where the server's bytes differ from renderVariant's (settings drift). */
  mismatchedWidths: number[];
}

/** `count` distinct widths evenly spaced from 100 up to `maxWidth`, skipping `avoid`. */
export function coldWidths(count: number, maxWidth: number, avoid: number): number[] {
  const lo = 100;
  const step = Math.floor((maxWidth - lo) / count);
  if (step < 2) throw new Error(`无法在 ${lo}..${maxWidth} 内取得 ${count} 个不同宽度`);
  // `avoid` is the warm width, already cached: its neighbour (step >= 2, so still distinct) replaces it.
  return Array.from({ length: count }, (_, i) => lo + 1 + i * step).map((w) => (w === avoid ? w + 1 : w));
}

const rawSharp = (input: Buffer, width: number, s: WebpSettings) =>
  sharp(input).resize({ width, withoutEnlargement: true }).webp({ quality: s.quality, effort: s.effort }).toBuffer();

// Kura reads the original from its channel into a fresh Buffer for every render; a fresh copy
// here keeps libvips' operation cache from recognising the input between calls.
const fresh = (jpeg: Uint8Array) => Buffer.from(jpeg);

async function timed<T>(series: ColdSeries, cpu: () => number, fn: () => Promise<T>): Promise<T> {
  const c0 = cpu();
  const t0 = performance.now();
  const out = await fn();
  const ms = performance.now() - t0;
  series.latenciesMs.push(ms);
  series.wallMs += ms;
  series.cpuMs += cpu() - c0;
  return out;
}

/**
 * For each width: raw sharp, renderVariant and the server, interleaved so that drift in
 * machine speed hits all three alike. One warm-up of each side first (JIT, libvips init).
 */
export async function runColdVariants(
  server: BenchServer,
  id: string,
  jpeg: Uint8Array,
  widths: readonly number[],
  warmupWidth: number,
  s: WebpSettings,
): Promise<ColdResult> {
  const empty = (): ColdSeries => ({ latenciesMs: [], cpuMs: 0, wallMs: 0 });
  const result: ColdResult = { sharp: empty(), render: empty(), kura: empty(), mismatchedWidths: [] };
  const render = (width: number) =>
    renderVariant(fresh(jpeg), { width, format: "webp", quality: { webp: s.quality, jpeg: 82 }, webpMethod: s.effort, timeoutMs: s.timeoutMs });
  const get = async (width: number) => {
    const res = await fetch(server.url(`/i/${id}?w=${width}`), { headers: { accept: "image/webp" } });
    const body = new Uint8Array(await res.arrayBuffer());
    if (res.status !== 200 || res.headers.get("content-type") !== "image/webp") {
      throw new Error(`冷变体请求失败：w=${width} HTTP ${res.status} ${res.headers.get("content-type")}`);
    }
    return body;
  };
  await rawSharp(fresh(jpeg), warmupWidth, s);
  await render(warmupWidth);
  // The server's warm-up width is its first render anyway (the caller already fetched it).
  for (const [i, width] of widths.entries()) {
    let mine: Buffer | undefined;
    let theirs: Uint8Array | undefined;
    const steps = [
      async () => void (await timed(result.sharp, ownCpuMs, () => rawSharp(fresh(jpeg), width, s))),
      async () => void (mine = await timed(result.render, ownCpuMs, () => render(width))),
      async () =>
        void (theirs = await timed(
          result.kura,
          () => server.cpuMs(),
          () => get(width),
        )),
    ];
    // Rotate who goes first, so no side always runs right after the others (cache, frequency).
    for (let k = 0; k < steps.length; k++) await steps[(i + k) % steps.length]!();
    if (!Buffer.from(theirs!).equals(mine!)) result.mismatchedWidths.push(width);
  }
  return result;
}
