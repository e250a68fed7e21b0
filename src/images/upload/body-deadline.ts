// The upload body's idle deadline: an upload holds a slot of the upload gate (and a temp file)
// while its body arrives, and without a deadline a client that sends the start of a body and
// then nothing kept both until Bun's connection idle timeout (120 s), or for ever with a byte
// now and then. Every upload reader (multipart, Chevereto's urlencoded form) reads through this.
import { Invalid } from "../../errors";
import { withIdleDeadline as withSourceDeadline } from "../../shared/idle-deadline";

/** What an upload body may cost: its size cap and the longest silence while it arrives. */
export interface BodyLimits {
  maxBytes: number;
  /** Milliseconds without a byte after which the upload fails with 408 (`upload_idle_timeout_seconds`). */
  idleMs: number;
}

export const bodyStalled = (idleMs: number) => new Invalid(`上传数据中断：${Math.round(idleMs / 1000)} 秒内没有收到数据`, "stalled");

/**
 * The same body, failing with a `stalled` Invalid (408) when no piece arrives within `idleMs` of
 * being asked for; the request's body is then cancelled, so nothing more is read from it. A slow
 * but steady client passes however long the whole body takes: a phone on a bad link sends
 * little, but it keeps sending.
 */
export function withIdleDeadline(body: ReadableStream<Uint8Array>, idleMs: number, cap?: { bytes: number; over: () => Error }): ReadableStream<Uint8Array> {
  return withSourceDeadline(body, idleMs, () => bodyStalled(idleMs), cap);
}

/**
 * True for the deadline's own failures, a silence or a body over its cap (to pass them on
 * unchanged where other read errors become "上传中断").
 */
export const isBodyLimitError = (err: unknown): err is Invalid => err instanceof Invalid && (err.problem === "stalled" || err.problem === "too_large");
