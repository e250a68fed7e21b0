import pkg from "../package.json" with { type: "json" };

// Replaced at compile time by build.ts (`define`); absent when running from source.
declare const __KURA_COMMIT__: string | undefined;
declare const __KURA_BUILT_AT__: string | undefined;

function sourceCommit(): string {
  try {
    const out = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: import.meta.dir, stderr: "ignore" });
    const text = out.stdout.toString().trim();
    return out.success && text ? text : "unknown";
  } catch {
    return "unknown";
  }
}

export const BUILD = {
  version: pkg.version,
  commit: typeof __KURA_COMMIT__ === "string" ? __KURA_COMMIT__ : sourceCommit(),
  built_at: typeof __KURA_BUILT_AT__ === "string" ? __KURA_BUILT_AT__ : new Date().toISOString(),
} as const;
