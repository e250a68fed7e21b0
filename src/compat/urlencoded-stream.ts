// A streaming application/x-www-form-urlencoded parser. It finds the same fields as
// URLSearchParams (the WHATWG urlencoded parser: split on `&`, then at the first `=`, `+` is a
// space, then percent-decoding, where a `%` not followed by two hex digits stays as it is), but
// a value comes out as runs of decoded bytes while the body arrives, so a field of any length
// costs no more memory than the chunk at hand. (busboy parses urlencoded too, but gathers each
// value into one string first: a 28 MB base64 `source` was 28 MB of string per request.)

/** `field`: a name is complete and its value's bytes follow; `end`: that value is complete. */
export type FormEvent = { type: "field"; name: string; nameTooLong: boolean } | { type: "value"; bytes: Uint8Array } | { type: "end" };

const AMP = 0x26;
const EQ = 0x3d;
const PLUS = 0x2b;
const PCT = 0x25;
const SPACE = 0x20;

/** The value of an ASCII hex digit, or -1. */
function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  return -1;
}

/**
 * Names and values are UTF-8 with invalid sequences replaced, and a leading BOM kept, as
 * URLSearchParams decodes them; a decoder per value, with `stream: true`, so a character split
 * across chunks decodes whole.
 */
export const utf8Decoder = () => new TextDecoder("utf-8", { ignoreBOM: true });

export class UrlencodedParser {
  /** In the value part of the current `name=value` sequence. */
  private inValue = false;
  /** The current sequence has at least one byte (an empty one, as in `a&&b`, is no field). */
  private started = false;
  private name: number[] = [];
  private nameTooLong = false;
  /** Percent-decoding: 0 none pending, 1 after `%`, 2 after `%` and one hex digit (`hi`). */
  private pct = 0;
  private hi = 0;
  /** This push's decoded value bytes, and where the current field's run in it starts. */
  private out = new Uint8Array(0);
  private n = 0;
  private runStart = 0;
  private events: FormEvent[] = [];

  /** Names longer than this (decoded bytes) are reported as `nameTooLong` instead of kept whole. */
  constructor(private readonly maxNameBytes = Number.POSITIVE_INFINITY) {}

  /** The events of the next piece of the body, in order. */
  push(chunk: Uint8Array): FormEvent[] {
    // Decoded bytes never outnumber raw ones, plus up to two pending from the previous chunk.
    this.out = new Uint8Array(chunk.length + 2);
    this.n = 0;
    this.runStart = 0;
    this.events = [];
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (c === AMP) this.endSequence();
      else if (c === EQ && !this.inValue) {
        this.flushPending();
        this.startValue();
      } else {
        this.started = true;
        this.decode(c === PLUS ? SPACE : c);
      }
    }
    this.flushRun();
    return this.events;
  }

  /** The events once the body has ended. */
  end(): FormEvent[] {
    this.out = new Uint8Array(2);
    this.n = 0;
    this.runStart = 0;
    this.events = [];
    this.endSequence();
    return this.events;
  }

  private decode(b: number) {
    if (this.pct === 2) {
      const lo = hexValue(b);
      this.pct = 0;
      if (lo >= 0) return this.emit(hexValue(this.hi) * 16 + lo);
      this.emit(PCT);
      this.emit(this.hi);
    } else if (this.pct === 1) {
      this.pct = 0;
      if (hexValue(b) >= 0) {
        this.hi = b;
        this.pct = 2;
        return;
      }
      this.emit(PCT);
    }
    // Here nothing is pending: `b` starts an escape or is a byte of its own.
    if (b === PCT) this.pct = 1;
    else this.emit(b);
  }

  /** A `%` (and digit) that the sequence ended after stays as it was. */
  private flushPending() {
    if (this.pct >= 1) this.emit(PCT);
    if (this.pct === 2) this.emit(this.hi);
    this.pct = 0;
  }

  private emit(b: number) {
    if (this.inValue) this.out[this.n++] = b;
    else if (this.name.length < this.maxNameBytes) this.name.push(b);
    else this.nameTooLong = true;
  }

  private startValue() {
    this.started = true;
    this.inValue = true;
    this.events.push({ type: "field", name: this.decodedName(), nameTooLong: this.nameTooLong });
    this.runStart = this.n;
  }

  private endSequence() {
    this.flushPending();
    if (this.started) {
      if (!this.inValue) this.startValue();
      this.flushRun();
      this.events.push({ type: "end" });
    }
    this.inValue = false;
    this.started = false;
    this.name = [];
    this.nameTooLong = false;
  }

  private flushRun() {
    if (this.inValue && this.n > this.runStart) this.events.push({ type: "value", bytes: this.out.subarray(this.runStart, this.n) });
    this.runStart = this.n;
  }

  private decodedName(): string {
    return utf8Decoder().decode(new Uint8Array(this.name));
  }
}
