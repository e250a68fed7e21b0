import type { ByteRange, GetResult } from "../driver";
import { clampRange, exactLengthStream, sliceStream } from "./sized-body";

/**
 * Turning an HTTP GET answer into a GetResult, for drivers that send `Range`.
 * Servers differ: most answer 206 with the part asked for, some send more than
 * asked, some ignore Range and send the whole object with 200.
 */

/** The `Range` request header for `range`. */
export function rangeHeader(range: ByteRange): string {
  return `bytes=${range.start}-${range.end ?? ""}`;
}

/**
 * A 206 answer, checked against the range asked for. Trust but verify: some
 * servers mis-handle e.g. "bytes=0-0" and send more (cut down here) or send
 * another part altogether (refused with an error naming `label`).
 */
export async function partialResult(stream: ReadableStream<Uint8Array>, contentRange: string | null, range: ByteRange, label: string): Promise<GetResult> {
  const part = coveredPart(contentRange, range);
  if (!part) {
    await stream.cancel();
    throw new Error(mismatchedPart(label));
  }
  return sizedPart(stream, part.start, part.gotEnd, part.end, part.totalSize, label);
}

export const mismatchedPart = (label: string) => `${label} 返回的范围与请求不符 (Content-Range 无效)`;

/**
 * What a 206's Content-Range says, checked against the range asked for: undefined when it is no
 * `bytes a-b/total` at all, when it starts elsewhere or ends short, and when its total leaves
 * nothing of the range asked for (the object shrank): each is the peer's answer not fitting the
 * question, which the caller refuses after cancelling the body.
 */
export function coveredPart(contentRange: string | null, range: ByteRange): { start: number; gotEnd: number; end: number; totalSize: number } | undefined {
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec((contentRange ?? "").trim());
  if (!m) return undefined;
  const [gotStart, gotEnd, totalSize] = [Number(m[1]), Number(m[2]), Number(m[3])];
  let asked: { start: number; end: number };
  try {
    asked = clampRange(range, totalSize);
  } catch (err) {
    if (err instanceof RangeError) return undefined;
    throw err;
  }
  return gotStart === asked.start && gotEnd >= asked.end ? { start: asked.start, gotEnd, end: asked.end, totalSize } : undefined;
}

/** The part [start, end] of a 206 that carried [start, gotEnd] (gotEnd ≥ end), held to its length. */
export function sizedPart(stream: ReadableStream<Uint8Array>, start: number, gotEnd: number, end: number, totalSize: number, label: string): GetResult {
  const size = end + 1 - start;
  const sent = exactLengthStream(stream, gotEnd + 1 - start, label);
  return { stream: gotEnd > end ? sliceStream(sent, 0, size) : sent, size, totalSize };
}

/**
 * An answer carrying the whole object of `total` bytes, held to that length (see
 * exactLengthStream: `total` may come from a listing when the answer had no length);
 * a range the server ignored is cut out here.
 */
export function wholeResult(stream: ReadableStream<Uint8Array>, total: number, range?: ByteRange, label = "存储服务"): GetResult {
  const sent = exactLengthStream(stream, total, label);
  if (!range) return { stream: sent, size: total, totalSize: total };
  const { start, end } = clampRange(range, total);
  return { stream: sliceStream(sent, start, end + 1 - start), size: end + 1 - start, totalSize: total };
}
