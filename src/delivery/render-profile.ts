// What, besides the source and the requested size and format, decides a variant's bytes: the
// encoder settings and the renderer. It is part of a variant's ETag and cache key, so a strong
// ETag never names two different byte sequences (RFC 9110 8.8.1): before, a quality change plus a
// cache eviction re-rendered different bytes under the old tag, and a browser's revalidation got a
// 304 for bytes it did not hold (image-fidelity audit LOW-1; imgproxy has IMGPROXY_ETAG_BUSTER).
// A delivery thread computes it too, so this imports no sharp: its version comes from package.json
// (sharp pins the libvips it ships with; read by path, as its exports do not list it).
import { version as sharpVersion } from "../../node_modules/sharp/package.json";
import type { Settings } from "../config/settings-schema";

/**
 * Raised by hand when a change in transform.ts makes different bytes from the same settings
 * (2: PNG sources' WebP lossless when smaller, palette/16-bit/grey PNG output).
 */
export const RENDER_REVISION = 2;

export type RenderSettings = Pick<Settings, "process_quality_webp" | "process_quality_jpeg" | "process_webp_method">;

const profiles = new WeakMap<RenderSettings, string>();

/** A short tag of the render settings; the same settings object gives the same string without work (hot path). */
export function renderProfile(settings: RenderSettings): string {
  let profile = profiles.get(settings);
  if (profile === undefined) {
    const text = `${RENDER_REVISION}|${sharpVersion}|${settings.process_quality_webp}|${settings.process_quality_jpeg}|${settings.process_webp_method}`;
    profile = (BigInt(Bun.hash.wyhash(text)) & 0xffffffffffn).toString(36);
    profiles.set(settings, profile);
  }
  return profile;
}
