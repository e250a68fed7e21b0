import { randomBytes } from "node:crypto";

/**
 * Storage key of a new blob: fanned out by hash so no directory grows huge, with a random
 * generation suffix so a blob re-created after a physical delete never shares a key with
 * the objects that delete is still removing.
 */
export function storageKeyFor(sha256: string, ext: string): string {
  return `img/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}-${randomBytes(4).toString("hex")}.${ext}`;
}

export const STORAGE_KEY_PATTERN = /^img\/[0-9a-f]{2}\/[0-9a-f]{2}\/([0-9a-f]{64})-[0-9a-f]{8}\.[a-z0-9]+$/;

/** The sha256 a key made by storageKeyFor carries; undefined for any other key. */
export function sha256OfStorageKey(key: string): string | undefined {
  return STORAGE_KEY_PATTERN.exec(key)?.[1];
}
