/**
 * Guards of a paged listing against a peer (or a proxy in front of it) whose listing never ends:
 * the same continuation again, or pages that hold nothing yet claim more. Each is a failed listing,
 * so a drain backs off with its `drain_failed` alert open instead of listing forever at thousands
 * of requests a second. S3 and the OAuth drives share it.
 */

/**
 * Pages in a row without a single entry that still claim more: a thousand are allowed. A sound
 * peer sends some (S3 over long runs of delete markers, Drive while it searches); one that loops
 * sends them forever.
 */
export const MAX_EMPTY_PAGES = 1000;

/** The paging of one listing: every continuation it is asked to follow must be new, and the run of empty pages short. */
export class PageGuard {
  // Hashes, not the strings: the peer chooses how long its tokens are.
  private readonly used = new Set<number | bigint>();
  private emptyPages = 0;

  /** `fail(why)` is the listing's error, in the driver's own words around `why`. */
  constructor(private readonly fail: (why: string) => Error) {}

  /** `continuation` (the next page's token, cursor or marker) after a page of `entries` entries. */
  follow<T extends string>(continuation: T, entries: number): T {
    const hash = Bun.hash(continuation);
    if (this.used.has(hash)) throw this.fail("分页没有进展（重复的续传标记）");
    this.used.add(hash);
    if (entries > 0) this.emptyPages = 0;
    else if (++this.emptyPages > MAX_EMPTY_PAGES) throw this.fail(`连续 ${MAX_EMPTY_PAGES} 页没有条目，分页没有进展`);
    return continuation;
  }
}
