/**
 * A small in-memory LRU of hot image bytes (originals and variants). Content behind a
 * key never changes (originals are content-addressed blobs, variants are derived from
 * them), so entries need no invalidation beyond eviction and blob deletion.
 */
export class HotBytes {
  private readonly entries = new Map<string, Uint8Array>();
  private total = 0;

  constructor(
    readonly maxBytes: number,
    readonly maxItemBytes: number,
  ) {}

  get(key: string): Uint8Array | undefined {
    const bytes = this.entries.get(key);
    if (!bytes) return undefined;
    this.entries.delete(key);
    this.entries.set(key, bytes);
    return bytes;
  }

  /** Keeps `bytes` when small enough, evicting the least recently used entries. */
  set(key: string, bytes: Uint8Array) {
    if (bytes.byteLength > this.maxItemBytes || bytes.byteLength > this.maxBytes) return;
    this.delete(key);
    this.entries.set(key, bytes);
    this.total += bytes.byteLength;
    for (const [k, v] of this.entries) {
      if (this.total <= this.maxBytes) break;
      this.entries.delete(k);
      this.total -= v.byteLength;
    }
  }

  delete(key: string) {
    const old = this.entries.get(key);
    if (!old) return;
    this.entries.delete(key);
    this.total -= old.byteLength;
  }

  /** Drops every entry whose key starts with `prefix` (all bytes of one blob). */
  deletePrefix(prefix: string) {
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.delete(key);
  }

  get size(): number {
    return this.total;
  }
}
