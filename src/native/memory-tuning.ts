// Native memory knobs, set once at `kura serve` start and chosen from measurements of
// bench/huge.ts (7360x4912 JPEG sources, 4 cold renders in flight, 2 cores).
import sharp from "sharp";

/** glibc's mallopt() parameter number for M_ARENA_MAX (malloc.h). */
const M_ARENA_MAX = -8;
/** Arenas for the whole process; glibc's default is 8 x cores. */
const ARENA_MAX = 2;

export function tuneNativeMemory(): void {
  // libvips' operation cache keeps recent operations with their decoded inputs (default: 50 MB,
  // 20 open files, 100 operations). Kura never repeats an operation soon: finished variants
  // live in our own disk and hot-bytes caches, so the cache only added ~100 MiB of peak RSS.
  sharp.cache(false);
  limitMallocArenas();
}

/**
 * libvips worker threads each grow their own glibc malloc arena, and freed image buffers stay
 * mapped in them; two arenas keep peak and retained RSS down at no measurable cost in speed.
 * MALLOC_ARENA_MAX set by the operator wins (glibc read it at start); elsewhere than glibc
 * (musl), or if FFI is unavailable, nothing happens.
 */
function limitMallocArenas(): void {
  if (process.platform !== "linux" || process.env.MALLOC_ARENA_MAX) return;
  try {
    // Loaded lazily: bun:ffi is only needed here, and only on Linux.
    const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
    const libc = dlopen("libc.so.6", { mallopt: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
    libc.symbols.mallopt(M_ARENA_MAX, ARENA_MAX);
  } catch {
    // not glibc: its allocator has no arenas to cap
  }
}
