/** Where the executable unpacks sharp's native libraries (src/native/cache-dirs.ts). */
import { expect, test } from "bun:test";
import { nativeCacheCandidates } from "../../src/native/cache-dirs";

const dirs = (env: Record<string, string>) => nativeCacheCandidates({ TMPDIR: "/tmp", ...env }).map((c) => c.dir);

test("KURA_NATIVE_DIR first, then the XDG cache, the home cache and a private folder under TMPDIR", () => {
  const uid = process.getuid?.() ?? 0;
  expect(dirs({ KURA_NATIVE_DIR: "/opt/n", XDG_CACHE_HOME: "/x", HOME: "/home/k" })).toEqual([
    "/opt/n",
    "/x/kura",
    "/home/k/.cache/kura",
    `/tmp/kura-native-${uid}`,
  ]);
});

test("never inside the data directory: the service user's home is often the data directory itself", () => {
  const uid = process.getuid?.() ?? 0;
  // sudo -u kura … kura check: HOME=/var/lib/kura, the data directory.
  expect(dirs({ KURA_DATA_DIR: "/var/lib/kura", HOME: "/var/lib/kura" })).toEqual([`/tmp/kura-native-${uid}`]);
  expect(dirs({ KURA_DATA_DIR: "/var/lib/kura/", HOME: "/var/lib/kura/sub", XDG_CACHE_HOME: "/var/lib/kura/.cache" })).toEqual([`/tmp/kura-native-${uid}`]);
  // A sibling that only shares the name's start is elsewhere; an explicit KURA_NATIVE_DIR is the operator's choice.
  expect(dirs({ KURA_DATA_DIR: "/var/lib/kura", HOME: "/var/lib/kura2", KURA_NATIVE_DIR: "/var/lib/kura/native" })).toEqual([
    "/var/lib/kura/native",
    "/var/lib/kura2/.cache/kura",
    `/tmp/kura-native-${uid}`,
  ]);
});
