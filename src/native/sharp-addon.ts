// Loads sharp's native addon inside the single-file executable (`bun build --compile`).
//
// Inside the executable the addon and libvips only exist in Bun's virtual /$bunfs, which
// the dynamic linker cannot see. So we copy them ONCE to a versioned cache directory,
// mirroring the node_modules/@img layout:
//   <cache>/native-sharp-<ver>-<platform>-<hash>/sharp-<platform>/lib/<addon>.node
//   <cache>/native-sharp-<ver>-<platform>-<hash>/sharp-libvips-<platform>/lib/libvips-cpp.so.X
// The addon's RPATH contains `$ORIGIN/../../sharp-libvips-<platform>/lib`, so the linker
// then finds libvips by itself (no LD_LIBRARY_PATH, which can't be changed at runtime).
//
// build.ts swaps sharp's own loader module (sharp/dist/sharp.{mjs,cjs}) for a generated
// one that embeds both files and calls loadEmbeddedSharpAddon(); running from source
// never imports this file, so sharp keeps loading from node_modules as usual.
import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { log } from "../ops/log";
import { nativeCacheCandidates, prepareCacheDir, removeOtherNativeVersions } from "./cache-dirs";

export interface EmbeddedFile {
  /** File name the linker expects (the addon's DT_NEEDED entry for libvips). */
  name: string;
  /** Path inside the executable's virtual filesystem (from `with { type: "file" }`). */
  path: string;
  /** Size at build time; a cached copy of another size is damaged (e.g. crash mid-write). */
  size: number;
}

export interface EmbeddedSharp {
  platform: string; // e.g. "linux-x64", as in sharp's runtimePlatformArch()
  sharpVersion: string;
  contentHash: string; // hash of both files, computed by build.ts
  addon: EmbeddedFile;
  libvips: EmbeddedFile;
}

let loadedAddon: unknown;

/** Extracts (first run only) and dlopens the addon; returns what sharp's loader exported. */
export function loadEmbeddedSharpAddon(embedded: EmbeddedSharp): unknown {
  // sharp.mjs and sharp.cjs may both be bundled; a second dlopen must not happen.
  if (loadedAddon) return loadedAddon;
  const failures: string[] = [];
  for (const candidate of nativeCacheCandidates()) {
    try {
      const base = prepareCacheDir(candidate);
      const dir = ensureExtracted(base, embedded);
      const addon = dlopenAddon(join(dir, addonRelPath(embedded)));
      assertCpuSupported(addon, embedded.platform);
      loadedAddon = addon;
      removeOtherNativeVersions(base, basename(dir));
      // An unusable KURA_NATIVE_DIR or home cache is not skipped in silence.
      if (failures.length) log.info("已从备用目录加载 sharp 原生模块", { dir: base, skipped: failures.join("；") });
      return addon;
    } catch (err) {
      failures.push(`${candidate.dir}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  // One line: the command's failure line shows it as is.
  throw new Error(`无法加载内嵌的 sharp 原生模块（${embedded.platform}）。可设置 KURA_NATIVE_DIR 指定一个可写且允许执行的目录。${failures.join("；")}`);
}

/** Returns the directory holding a complete copy, extracting it atomically if needed. */
export function ensureExtracted(baseDir: string, embedded: EmbeddedSharp): string {
  const finalDir = join(baseDir, `native-sharp-${embedded.sharpVersion}-${embedded.platform}-${embedded.contentHash}`);
  if (isComplete(finalDir, embedded)) return finalDir;
  if (existsSync(finalDir)) discard(finalDir); // damaged copy: move aside, then delete

  // Write everything into a private temp dir, then publish it with a single rename(2):
  // other processes either see no directory or a complete one, never a partial one.
  const tmpDir = join(baseDir, `.tmp-${process.pid}-${randomSuffix()}`);
  try {
    writeEmbedded(join(tmpDir, libvipsRelPath(embedded)), embedded.libvips);
    writeEmbedded(join(tmpDir, addonRelPath(embedded)), embedded.addon);
    renameSync(tmpDir, finalDir);
  } catch (err) {
    rmSync(tmpDir, { recursive: true, force: true });
    // rename fails with EEXIST/ENOTEMPTY when a concurrent process published first.
    if (isComplete(finalDir, embedded)) return finalDir;
    throw err;
  }
  return finalDir;
}

function addonRelPath(e: EmbeddedSharp): string {
  return join(`sharp-${e.platform}`, "lib", e.addon.name);
}

function libvipsRelPath(e: EmbeddedSharp): string {
  return join(`sharp-libvips-${e.platform}`, "lib", e.libvips.name);
}

function isComplete(dir: string, e: EmbeddedSharp): boolean {
  return hasSize(join(dir, addonRelPath(e)), e.addon.size) && hasSize(join(dir, libvipsRelPath(e)), e.libvips.size);
}

function hasSize(path: string, size: number): boolean {
  try {
    const st = statSync(path);
    return st.isFile() && st.size === size;
  } catch {
    return false;
  }
}

function writeEmbedded(target: string, file: EmbeddedFile): void {
  mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  writeFileSync(target, readFileSync(file.path), { mode: 0o755 });
}

function discard(dir: string): void {
  const trash = `${dir}.broken-${process.pid}-${randomSuffix()}`;
  try {
    renameSync(dir, trash);
    rmSync(trash, { recursive: true, force: true });
  } catch {
    // Another process may be repairing it at the same time; the rename below decides.
  }
}

function randomSuffix(): string {
  return Math.random().toString(36).slice(2, 10);
}

function dlopenAddon(path: string): unknown {
  const mod: { exports: Record<string, unknown> } = { exports: {} };
  process.dlopen(mod, path);
  return mod.exports;
}

// Same guard as sharp's own loader: the prebuilt linux-x64 binaries need x86-64-v2.
function assertCpuSupported(addon: unknown, platform: string): void {
  const probe = (addon as { _isUsingX64V2?: () => boolean })._isUsingX64V2;
  if (["linux-x64", "linuxmusl-x64"].includes(platform) && typeof probe === "function" && !probe()) {
    throw new Error("sharp 的预编译二进制需要支持 x86-64-v2 指令集的 CPU");
  }
}
