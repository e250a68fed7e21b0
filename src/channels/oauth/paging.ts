/**
 * Guards of the Drive, Dropbox and OneDrive folder walks against a provider whose listing never
 * ends: folders nested without end here, the paging of each folder by the guard S3 uses too
 * (drivers/page-guard.ts). Each is a failed listing, so a drain backs off with its `drain_failed`
 * alert open instead of listing forever.
 */
import { OAuthError } from "./errors";
import { keyDepth } from "../drivers/object-key";
import { PageGuard } from "../drivers/page-guard";

/**
 * Folder levels below the channel's root a walk enters. Kura's own keys are a few levels deep
 * (`img/ab/cd/<file>`, `_kura/backups/<file>`); a folder that holds itself, or a provider that
 * invents a child folder on every listing, would otherwise be walked without end.
 */
export const MAX_WALK_DEPTH = 32;

/** A listing answer Kura cannot trust: the provider's label and why. */
export function invalidListing(label: string, why: string): OAuthError {
  return new OAuthError(`${label} 列表响应格式无效：${why}`);
}

/** Fails before the walk enters a folder deeper than MAX_WALK_DEPTH (`dirKey` relative to the root). */
export function checkWalkDepth(label: string, dirKey: string): void {
  if (keyDepth(dirKey) > MAX_WALK_DEPTH) throw invalidListing(label, `文件夹层级超过 ${MAX_WALK_DEPTH} 层（可能是循环的文件夹结构）`);
}

/** A guard of one folder's paging (drivers/page-guard.ts) that fails as an invalid listing of `label`. */
export function folderPageGuard(label: string): PageGuard {
  return new PageGuard((why) => invalidListing(label, why));
}
