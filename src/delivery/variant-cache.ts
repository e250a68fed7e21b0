// Disk cache of rendered variants, LRU-bounded by `variants_cache_mb`.
// Layout: <dir>/<first 2 chars of key>/<key>, e.g. variants/ab/ab12…ef-640-webp.
// Recency lives in memory (a Map in LRU order); file mtimes are refreshed only now and then,
// in the background, so a restart keeps a rough LRU order without a write per cache hit.
import { mkdirSync, readdirSync, statSync, unlinkSync } from "node:fs";
import { mkdir, rename, unlink, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface VariantCacheOptions {
  dir: string;
  maxBytes: number;
  /** Called for LRU evictions only (not for explicit delete/deletePrefix). */
  onEvict?: (key: string, size: number) => void;
}

interface Entry {
  size: number;
  /** Last time the file mtime was written (ms), to rate-limit touches. */
  touchedAt: number;
}

// Keys are file names: refuse anything that could escape the directory or hide as a temp file.
const KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{2,200}$/;
const TEMP_PREFIX = ".tmp-";
const TOUCH_INTERVAL_MS = 60 * 60 * 1000;

export class VariantCache {
  readonly dir: string;
  #maxBytes: number;
  #totalBytes = 0;
  /** Insertion order = recency: first = least recently used. */
  readonly #entries = new Map<string, Entry>();
  readonly #onEvict?: (key: string, size: number) => void;

  constructor(opts: VariantCacheOptions) {
    this.dir = opts.dir;
    this.#maxBytes = Math.max(0, opts.maxBytes);
    this.#onEvict = opts.onEvict;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.#rebuild();
    for (const victim of this.#selectVictims()) this.#removeFileSync(victim);
  }

  get maxBytes(): number {
    return this.#maxBytes;
  }
  get totalBytes(): number {
    return this.#totalBytes;
  }
  get count(): number {
    return this.#entries.size;
  }

  /**
   * Path of a cached variant and marks it recently used. No disk access: if the file vanished
   * behind our back, the caller's open fails; it should then call delete(key) and re-render.
   */
  get(key: string): { path: string; size: number } | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    const now = Date.now();
    if (now - entry.touchedAt > TOUCH_INTERVAL_MS) {
      entry.touchedAt = now;
      const t = new Date(now);
      void utimes(this.pathOf(key), t, t).catch(() => {});
    }
    return { path: this.pathOf(key), size: entry.size };
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /**
   * Stores bytes atomically (temp file + rename), then evicts least recently used variants
   * until the total fits. Returns the path, or null when the item is not kept (cache size 0,
   * or larger than the whole bound); the caller serves from its buffer either way.
   */
  async put(key: string, bytes: Uint8Array): Promise<string | null> {
    assertKey(key);
    if (bytes.byteLength > this.#maxBytes) {
      await this.delete(key); // an older copy would be stale next to what the caller serves
      return null;
    }
    const path = this.pathOf(key);
    const sub = join(this.dir, key.slice(0, 2));
    await mkdir(sub, { recursive: true, mode: 0o700 });
    const tmp = join(sub, `${TEMP_PREFIX}${key}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
    try {
      await writeFile(tmp, bytes, { mode: 0o600 });
      await rename(tmp, path);
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
    this.#forget(key);
    this.#entries.set(key, { size: bytes.byteLength, touchedAt: Date.now() });
    this.#totalBytes += bytes.byteLength;
    await this.#evictOverflow(key);
    return this.#entries.has(key) ? path : null;
  }

  async delete(key: string): Promise<boolean> {
    if (!KEY.test(key)) return false;
    const known = this.#forget(key);
    await unlink(this.pathOf(key)).catch(() => {});
    return known;
  }

  /** Deletes every variant of one blob (keys `<sha256>-…`), e.g. when the blob is deleted. */
  async deletePrefix(sha256: string): Promise<number> {
    const prefix = `${sha256}-`;
    const keys = [...this.#entries.keys()].filter((k) => k.startsWith(prefix));
    await Promise.all(keys.map((k) => this.delete(k)));
    return keys.length;
  }

  /** Hot change of `variants_cache_mb`; shrinking evicts at once. */
  async setMaxBytes(maxBytes: number): Promise<void> {
    this.#maxBytes = Math.max(0, maxBytes);
    await this.#evictOverflow();
  }

  pathOf(key: string): string {
    assertKey(key);
    return join(this.dir, key.slice(0, 2), key);
  }

  #forget(key: string): boolean {
    const old = this.#entries.get(key);
    if (!old) return false;
    this.#entries.delete(key);
    this.#totalBytes -= old.size;
    return true;
  }

  /** Removes LRU entries from the index until the total fits; returns them for unlinking. */
  #selectVictims(keep?: string): Array<{ key: string; size: number }> {
    const victims: Array<{ key: string; size: number }> = [];
    for (const [key, entry] of this.#entries) {
      if (this.#totalBytes <= this.#maxBytes) break;
      if (key === keep) continue;
      this.#forget(key);
      victims.push({ key, size: entry.size });
    }
    return victims;
  }

  async #evictOverflow(keep?: string): Promise<void> {
    const victims = this.#selectVictims(keep);
    // Reported in eviction order (least recently used first), not in unlink completion order.
    for (const v of victims) this.#onEvict?.(v.key, v.size);
    await Promise.all(victims.map((v) => unlink(this.pathOf(v.key)).catch(() => {})));
  }

  #removeFileSync(v: { key: string; size: number }): void {
    try {
      unlinkSync(this.pathOf(v.key));
    } catch {
      // already gone
    }
    this.#onEvict?.(v.key, v.size);
  }

  /** Index from disk, oldest mtime first; leftover temp files of a crash are removed. */
  #rebuild(): void {
    const found: Array<{ key: string; size: number; mtime: number }> = [];
    for (const sub of readdirSync(this.dir, { withFileTypes: true })) {
      if (!sub.isDirectory() || sub.name.length !== 2) continue;
      const subDir = join(this.dir, sub.name);
      for (const name of readdirSync(subDir)) {
        const file = join(subDir, name);
        if (name.startsWith(TEMP_PREFIX)) {
          tryUnlinkSync(file);
          continue;
        }
        if (!KEY.test(name) || !name.startsWith(sub.name)) continue; // not ours: leave it alone
        try {
          const st = statSync(file);
          if (st.isFile()) found.push({ key: name, size: st.size, mtime: st.mtimeMs });
        } catch {
          // vanished while scanning
        }
      }
    }
    found.sort((a, b) => a.mtime - b.mtime);
    for (const f of found) {
      this.#entries.set(f.key, { size: f.size, touchedAt: f.mtime });
      this.#totalBytes += f.size;
    }
  }
}

function assertKey(key: string): void {
  if (!KEY.test(key)) throw new Error(`无效的缓存键：${key.slice(0, 80)}`);
}

function tryUnlinkSync(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // ignore
  }
}
