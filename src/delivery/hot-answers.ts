import { parseSqlTime } from "../db/time";
import type { ImageView } from "../images/repo";

/**
 * What the pipeline hands back with a hot 200 answer (prepared headers over bytes in memory):
 * everything needed to give the same answer again without running the pipeline.
 */
export interface PreparedAnswer {
  image: ImageView;
  /** The HotBytes key of `body`: the memo serves it only while HotBytes still holds it. */
  hotKey: string;
  /** A variant (its hits count in the variant cache metrics), not an original. */
  variant: boolean;
  body: Blob;
  headers: Headers;
}

/** A remembered answer, ready to be given again. */
export interface WarmAnswer {
  response: Response;
  imageId: string;
  variant: boolean;
}

interface Entry {
  /** Weak: bytes HotBytes evicted must not stay alive here, or the memory budget would not hold. */
  body: WeakRef<Blob>;
  hotKey: string;
  headers: Headers;
  imageId: string;
  variant: boolean;
  /** Date.now() from which the entry is not served: the row's lookup freshness or the image's expiry. */
  until: number;
}

const MAX_ENTRIES = 4_096;
/** Longer URLs (plus Accept and Referer) are not remembered: a key never costs more than this. */
const MAX_KEY_LENGTH = 2_048;
/** Stands for an absent header in a key (a header value cannot contain NUL). */
const ABSENT = "\0";

/**
 * The warm-answer memo: the whole `/i/` answer to a `GET` that the pipeline answered from
 * memory moments ago, keyed by everything of the request that answer depends on (URL, Accept,
 * Referer). A warm request then skips the lookup, hotlink check, negotiation and header work:
 * 4–5 µs of a ~29 µs delivery, measured in bench/README.md (ninth session).
 *
 * Correct because:
 * - only unconditional, whole-body GETs are remembered (no If-None-Match, If-Modified-Since,
 *   If-Range, Range);
 * - the owner clears it on every change that can alter an `/i/` answer (an image forgotten by
 *   the lookups, a hotlink rule, any setting), exactly where the row cache and the delivery
 *   threads are told;
 * - an entry lives no longer than the image row it was built from (`freshUntil`) and never past
 *   the image's expiry, so it adds no staleness to the lookups' own;
 * - the bytes are served only while HotBytes still holds them (the same Blob): its budget and
 *   recency stay the ones that decide what is in memory.
 *
 * The caller still records the access, the variant hit and the request metrics of every answer.
 */
export class HotAnswers {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly hot: { get(key: string): Blob | undefined },
    private readonly freshUntil: (imageId: string) => number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The memo key of a request whose answer may be remembered, else undefined. */
  static keyOf(request: Request): string | undefined {
    if (request.method !== "GET") return undefined;
    const headers = request.headers;
    if (headers.has("range") || headers.has("if-none-match") || headers.has("if-modified-since") || headers.has("if-range")) return undefined;
    if (request.body) return undefined;
    const key = `${request.url}\n${headers.get("accept") ?? ABSENT}\n${headers.get("referer") ?? ABSENT}`;
    return key.length > MAX_KEY_LENGTH ? undefined : key;
  }

  /** The remembered answer under `key` as a new Response sharing its bytes, or undefined. */
  answer(key: string): WarmAnswer | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const body = entry.body.deref();
    if (this.now() >= entry.until || !body || this.hot.get(entry.hotKey) !== body) {
      this.entries.delete(key);
      return undefined;
    }
    return { response: new Response(body, { status: 200, headers: entry.headers }), imageId: entry.imageId, variant: entry.variant };
  }

  remember(key: string, prepared: PreparedAnswer) {
    const { image } = prepared;
    let until = this.freshUntil(image.id);
    if (image.expire_at !== null) until = Math.min(until, parseSqlTime(image.expire_at).getTime());
    if (until <= this.now()) return;
    this.entries.delete(key);
    this.entries.set(key, {
      body: new WeakRef(prepared.body),
      hotKey: prepared.hotKey,
      headers: prepared.headers,
      imageId: image.id,
      variant: prepared.variant,
      until,
    });
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
  }

  clear() {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
