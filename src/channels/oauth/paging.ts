/**
 * Guards of the Drive and Dropbox folder walks against a provider (or a proxy in front of it)
 * whose listing never ends: the same page token again, pages that hold nothing yet claim more,
 * folders nested without end. Each is a failed listing, so a drain backs off with its
 * `drain_failed` alert open instead of listing forever at thousands of requests a second.
 * (S3 has the same rules in drivers/s3/list.ts.)
 */
import { OAuthError } from "./errors";
import { keyDepth } from "../drivers/object-key";

/**
 * Pages in a row without a single entry that still claim more. A sound provider sends some at
 * most (Drive may answer a short page while it searches); one that loops sends them forever.
 */
export const MAX_EMPTY_PAGES = 1000;

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

/** The paging of one folder's listing: every token it is asked to follow must be new and the run of empty pages short. */
export class PageGuard {
  // Hashes, not the strings: the provider chooses how long its tokens are.
  private readonly used = new Set<number | bigint>();
  private emptyPages = 0;

  constructor(private readonly label: string) {}

  /** `token` (the next page's) after a page of `entries` entries, once it is known to be new. */
  follow(token: string, entries: number): string {
    const hash = Bun.hash(token);
    if (this.used.has(hash)) throw invalidListing(this.label, "分页没有进展（重复的续传标记）");
    this.used.add(hash);
    if (entries > 0) this.emptyPages = 0;
    else if (++this.emptyPages >= MAX_EMPTY_PAGES) throw invalidListing(this.label, `连续 ${MAX_EMPTY_PAGES} 页没有条目，分页没有进展`);
    return token;
  }
}
