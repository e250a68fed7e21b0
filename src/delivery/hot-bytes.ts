import type { VariantBytes } from "./pipeline";

/** In-memory budget for hot image bytes (per thread that serves them). */
export const HOT_BYTES_BUDGET = 64 * 1024 * 1024;

/** Key of a variant's bytes; an original's key is its sha256, so `deletePrefix(sha256)` drops a blob's all. */
export function variantKey(sha256: string, width: number, format: string, profile: string): string {
  return `${sha256}-${width}-${format}-${profile}`;
}

/**
 * A small in-memory LRU of hot image bytes (originals and variants). Content behind a
 * key never changes (originals are content-addressed blobs, variants are derived from
 * them), so entries need no invalidation beyond eviction and blob deletion.
 *
 * Entries are Blobs: `new Response(blob)` (and `blob.slice` for ranges) shares the bytes,
 * while `new Response(uint8Array)` copies them on every request, which for a 200 KB
 * original was a third of the server's CPU per delivery (bench/README.md).
 */
export class HotBytes {
  private readonly entries = new Map<string, Blob>();
  private total = 0;

  constructor(
    readonly maxBytes: number,
    readonly maxItemBytes: number,
  ) {}

  /** A variant's bytes when in memory, as the pipeline takes them. */
  variant(sha256: string, width: number, format: string, profile: string): VariantBytes | undefined {
    const hotKey = variantKey(sha256, width, format, profile);
    const bytes = this.get(hotKey);
    return bytes && { bytes, size: bytes.size, hotKey };
  }

  get(key: string): Blob | undefined {
    const bytes = this.entries.get(key);
    if (!bytes) return undefined;
    this.entries.delete(key);
    this.entries.set(key, bytes);
    return bytes;
  }

  /**
   * Keeps `bytes` when small enough, evicting the least recently used entries. Returns
   * them as a Blob either way, ready to be a response body.
   */
  set(key: string, bytes: Uint8Array | Blob): Blob {
    const blob = bytes instanceof Blob ? bytes : new Blob([bytes as Uint8Array<ArrayBuffer>]);
    if (blob.size > this.maxItemBytes || blob.size > this.maxBytes) return blob;
    this.delete(key);
    this.entries.set(key, blob);
    this.total += blob.size;
    for (const [k, v] of this.entries) {
      if (this.total <= this.maxBytes) break;
      this.entries.delete(k);
      this.total -= v.size;
    }
    return blob;
  }

  delete(key: string) {
    const old = this.entries.get(key);
    if (!old) return;
    this.entries.delete(key);
    this.total -= old.size;
  }

  /** Drops every entry whose key starts with `prefix` (all bytes of one blob). */
  deletePrefix(prefix: string) {
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.delete(key);
  }

  get size(): number {
    return this.total;
  }
}
