/**
 * Where a channel's objects live, as far as its configuration says: the keys that, changed,
 * point the channel at another place (a credential rotation does not), and the identity two
 * channels share when they would read and delete the same objects.
 */
import { realpathSync } from "node:fs";
import { resolveLocalPath } from "./drivers/local";

/** The config keys that decide where objects live, per backend. */
const LOCATION_KEYS: Record<string, readonly string[]> = {
  local: ["path"],
  s3: ["endpoint", "path"],
  webdav: ["url", "user", "path"],
  sftp: ["host", "port", "user", "path"],
  onedrive: ["region", "drive_id", "drive_type", "path"],
  drive: ["root_folder_id", "path"],
  dropbox: ["path"],
};

/**
 * Backends whose location names the account too, so the same location is the same objects.
 * An OAuth channel's account is its token (two OneDrive channels at the same path may be two
 * accounts), so those are never said to share a place.
 */
const ACCOUNT_IN_LOCATION = new Set(["local", "s3", "webdav", "sftp"]);

export interface ChannelPlace {
  driver: string;
  config: Record<string, string>;
  /** An encrypted channel names its objects with its own keys: it never shares them with another. */
  encrypted?: boolean;
}

const normalized = (value: string | undefined) => (value ?? "").trim().replace(/\/+$/, "");

function locationValues(place: ChannelPlace, dataDir?: string): string[] {
  // Without an endpoint, AWS's is made from the region.
  const regionPlaces = place.driver === "s3" && normalized(place.config.endpoint) === "" ? ["region"] : [];
  const keys = [...(LOCATION_KEYS[place.driver] ?? Object.keys(place.config).sort()), ...regionPlaces];
  return keys.map((key) => {
    if (place.driver === "local" && key === "path") return localPlace(place.config.path, dataDir);
    const value = normalized(place.config[key]);
    return key === "path" ? value.replace(/^\/+/, "") : value;
  });
}

/** A local directory as the file system sees it: relative to the data directory, symbolic links followed. */
function localPlace(path: string | undefined, dataDir?: string): string {
  let resolved: string;
  try {
    resolved = resolveLocalPath(path ?? "", dataDir);
  } catch {
    return normalized(path);
  }
  try {
    return realpathSync(resolved);
  } catch {
    return resolved;
  }
}

/**
 * True when `after` points the channel somewhere else than `before`: another backend, or a
 * location key changed. Its completed copies were made at the old place and prove nothing here.
 */
export function locationChanged(before: ChannelPlace, after: ChannelPlace, dataDir?: string): boolean {
  if (before.driver !== after.driver) return true;
  const [a, b] = [locationValues(before, dataDir), locationValues(after, dataDir)];
  return a.some((value, i) => value !== b[i]);
}

/**
 * True when both channels would store under the same place (and account): a purge of one
 * deleted the other's objects, and each counted the same bytes as a separate copy.
 */
export function samePlace(a: ChannelPlace, b: ChannelPlace, dataDir?: string): boolean {
  if (a.driver !== b.driver || !ACCOUNT_IN_LOCATION.has(a.driver) || a.encrypted || b.encrypted) return false;
  return !locationChanged(a, b, dataDir);
}
