// Builds Kura into ONE self-contained executable: `bun run build.ts` -> dist/kura
//
// Everything the server needs at runtime is inside the file: our code, node_modules JS,
// the files imported `with { type: "text" | "file" }`, and sharp's native addon plus
// libvips (see sharpEmbedPlugin below and src/native/sharp-addon.ts).
//
// Options (for development only): --entry <file>  --outfile <file>
import type { BunPlugin } from "bun";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = import.meta.dir;

interface SharpNativeFiles {
  platform: string;
  sharpVersion: string;
  addonPath: string;
  libvipsPath: string;
}

/** Finds sharp's prebuilt addon and libvips for the platform we build on. */
function locateSharpNative(): SharpNativeFiles {
  const sharpDir = dirname(dirname(Bun.resolveSync("sharp", ROOT))); // .../sharp/dist/index.mjs
  const req = createRequire(join(sharpDir, "package.json"));
  // Ask sharp itself, so glibc/musl naming matches what its loader would pick.
  const platform: string = req(join(sharpDir, "dist", "libvips.cjs")).runtimePlatformArch();
  const sharpVersion: string = JSON.parse(readFileSync(join(sharpDir, "package.json"), "utf8")).version;
  const addonLib = join(dirname(req.resolve(`@img/sharp-${platform}/package`)), "lib");
  const addons = readdirSync(addonLib).filter((f) => f.endsWith(".node"));
  if (addons.length !== 1) throw new Error(`expected one .node file in ${addonLib}, found: ${addons.join(", ")}`);
  const libvipsPath = createRequire(`${addonLib}/`).resolve(`@img/sharp-libvips-${platform}/binary`);
  return { platform, sharpVersion, addonPath: join(addonLib, addons[0]!), libvipsPath };
}

/**
 * Replaces sharp's loader module (which `require`s the addon from node_modules, impossible
 * inside the executable) with one that embeds addon + libvips and loads them through
 * src/native/sharp-addon.ts. Only used for the compiled build; from source sharp is untouched.
 */
function sharpEmbedPlugin(native: SharpNativeFiles): BunPlugin {
  const addon = readFileSync(native.addonPath);
  const libvips = readFileSync(native.libvipsPath);
  const libvipsName = native.libvipsPath.split("/").pop()!;
  // The runtime layout relies on these two facts; fail the build rather than the binary.
  if (!addon.includes(Buffer.from(libvipsName))) {
    throw new Error(`${native.addonPath} does not reference ${libvipsName} (DT_NEEDED changed?)`);
  }
  if (!addon.includes(Buffer.from(`$ORIGIN/../../sharp-libvips-${native.platform}/lib`))) {
    throw new Error(`${native.addonPath}: RPATH no longer contains $ORIGIN/../../sharp-libvips-${native.platform}/lib`);
  }
  const contentHash = createHash("sha256").update(addon).update(libvips).digest("hex").slice(0, 16);
  const loaderModule = join(ROOT, "src", "native", "sharp-addon.ts");
  const embedded = `
import addonPath from ${JSON.stringify(native.addonPath)} with { type: "file" };
import libvipsPath from ${JSON.stringify(native.libvipsPath)} with { type: "file" };
import { loadEmbeddedSharpAddon } from ${JSON.stringify(loaderModule)};
export default loadEmbeddedSharpAddon({
  platform: ${JSON.stringify(native.platform)},
  sharpVersion: ${JSON.stringify(native.sharpVersion)},
  contentHash: ${JSON.stringify(contentHash)},
  addon: { name: ${JSON.stringify(native.addonPath.split("/").pop())}, path: addonPath, size: ${addon.length} },
  libvips: { name: ${JSON.stringify(libvipsName)}, path: libvipsPath, size: ${libvips.length} },
});
`;
  return {
    name: "kura-embed-sharp-native",
    setup(build) {
      build.onLoad({ filter: /[\\/]sharp[\\/]dist[\\/]sharp\.mjs$/ }, () => ({ contents: embedded, loader: "js" }));
      // CommonJS entry of sharp, in case anything `require`s it: reuse the same module.
      build.onLoad({ filter: /[\\/]sharp[\\/]dist[\\/]sharp\.cjs$/ }, () => ({
        contents: `module.exports = require("./sharp.mjs").default;`,
        loader: "js",
      }));
    },
  };
}

function gitShortCommit(): string {
  try {
    const out = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: ROOT, stderr: "ignore" });
    const text = out.stdout.toString().trim();
    return out.success && text ? text : "unknown";
  } catch {
    return "unknown";
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Bun.argv.slice(2),
    options: { entry: { type: "string" }, outfile: { type: "string" } },
  });
  const entry = resolve(values.entry ?? join(ROOT, "src", "main.ts"));
  const outfile = resolve(values.outfile ?? join(ROOT, "dist", "kura"));
  const started = performance.now();
  const native = locateSharpNative();
  const commit = gitShortCommit();
  const builtAt = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

  const result = await Bun.build({
    // Delivery threads run this file as a Worker: a compiled executable only carries Worker
    // entries listed here (src/http/threads/pool.ts starts it).
    entrypoints: [entry, join(ROOT, "src", "http", "threads", "front-worker.ts")],
    compile: {
      outfile,
      // A server's behaviour must not depend on stray files in its working directory
      // (bunfig.toml `preload` would even run foreign code); config comes from KURA_* env.
      autoloadBunfig: false,
      autoloadDotenv: false,
      autoloadTsconfig: false,
      autoloadPackageJson: false,
    },
    sourcemap: "linked", // embedded: stack traces point at src/ files
    define: {
      __KURA_COMMIT__: JSON.stringify(commit),
      __KURA_BUILT_AT__: JSON.stringify(builtAt),
    },
    plugins: [sharpEmbedPlugin(native)],
  });
  if (!result.success) {
    for (const log of result.logs) console.error(log);
    throw new Error("build failed");
  }
  const size = Bun.file(outfile).size;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`built ${outfile} (${(size / 1024 / 1024).toFixed(1)} MiB, ${seconds}s, commit ${commit}, sharp ${native.sharpVersion} ${native.platform})`);
}

await main();
