// Where the compiled binary may unpack its native libraries (sharp addon + libvips).
//
// We use a per-user *cache* directory rather than <data_dir>:
//  - the addon is needed while the module graph is still being evaluated, i.e. before
//    the config (and therefore data_dir) has been parsed;
//  - the files are disposable and identical for every instance of the same build, so
//    they don't belong in (or in backups of) the user's data;
//  - several Kura instances of one build on a host can share one copy.
// Candidates are tried in order; a later one is used when an earlier one cannot be
// created or its files cannot be loaded (e.g. a home on a `noexec` mount).
import { lstatSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve, sep } from "node:path";

export interface CacheCandidate {
  dir: string;
  /** Shared, world-writable parents (like /tmp) need an ownership check before use. */
  shared: boolean;
}

export function nativeCacheCandidates(env: NodeJS.ProcessEnv = process.env): CacheCandidate[] {
  const out: CacheCandidate[] = [];
  // Explicit override for hosts where none of the defaults is writable+executable.
  if (env.KURA_NATIVE_DIR) out.push({ dir: env.KURA_NATIVE_DIR, shared: false });
  // Not inside the data directory: `sudo -u kura … kura check` gets the service user's home,
  // which is the data directory itself (/var/lib/kura), and 19 MB of libraries landed in it (and in
  // every copy an operator made of it). The explicit KURA_NATIVE_DIR is the operator's choice.
  const dataDir = env.KURA_DATA_DIR?.trim() ? resolve(env.KURA_DATA_DIR) : undefined;
  const outsideData = (dir: string) => dataDir === undefined || !isWithin(resolve(dir), dataDir);
  if (env.XDG_CACHE_HOME && outsideData(env.XDG_CACHE_HOME)) out.push({ dir: join(env.XDG_CACHE_HOME, "kura"), shared: false });
  const home = env.HOME || safeHomedir();
  if (home && outsideData(home)) out.push({ dir: join(home, ".cache", "kura"), shared: false });
  // Last resort (service users without a home). Per-uid name + ownership check below.
  const uid = typeof process.getuid === "function" ? process.getuid() : 0;
  out.push({ dir: join(env.TMPDIR || tmpdir(), `kura-native-${uid}`), shared: true });
  return out;
}

const isWithin = (dir: string, parent: string) => dir === parent || dir.startsWith(parent.endsWith(sep) ? parent : parent + sep);

function safeHomedir(): string | null {
  try {
    return homedir() || null;
  } catch {
    return null;
  }
}

/** Creates the candidate directory; throws (with a reason) if it is unusable. */
export function prepareCacheDir(c: CacheCandidate): string {
  mkdirSync(c.dir, { recursive: true, mode: 0o700 });
  if (c.shared) {
    // In a world-writable parent someone else could have planted this directory with
    // their own "libvips"; only trust it if it is ours and nobody else can write to it.
    const st = lstatSync(c.dir);
    const uid = typeof process.getuid === "function" ? process.getuid() : st.uid;
    if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) {
      throw new Error(`目录 ${c.dir} 不属于当前用户或可被他人写入，拒绝使用`);
    }
  }
  return c.dir;
}

/**
 * Every upgrade unpacks a new `native-sharp-<version>-…` folder next to the old ones. Once this
 * build's copy is loaded, the folders of other builds are removed so they do not pile up
 * (a process of another build that already loaded its copy keeps working: Linux keeps
 * mapped files alive). Temp folders of an extraction in progress (`.tmp-…`) are left alone.
 */
export function removeOtherNativeVersions(baseDir: string, keep: string): void {
  let names: string[];
  try {
    names = readdirSync(baseDir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith("native-sharp-") || name === keep) continue;
    try {
      rmSync(join(baseDir, name), { recursive: true, force: true });
    } catch {
      // Not ours to delete (another user's files in a shared cache): leave it.
    }
  }
}
