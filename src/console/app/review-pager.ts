// #review's two lists (similar-image pairs, cleanup candidates) page the same way: by number at
// any depth, with a jump box, a count beside the title, and a page past the end (the list shrank
// after a merge, a delete or another admin's work) clamped to the new last page.
import { api } from "./api";
import type { Page } from "./types";
import { renderPager } from "./ui";

export interface ReviewPager {
  /** Loads the current page (again): after a page click, and after anything that changes the list. */
  load(): Promise<void>;
  /** The list's length as of the last answer, every page counted. */
  readonly total: number;
}

export interface ReviewPagerOptions<T> {
  /** The list's endpoint; `page` and `page_size` are added. */
  path: string;
  pageSize: number;
  /** The pager's box: page buttons and the jump box go here. */
  pager: HTMLElement;
  /** Shows "<total> <unit>". */
  count: HTMLElement;
  unit: string;
  /** Renders the page's rows, once the pager is drawn; `current()` turns false when a newer load has begun. */
  show(data: Page<T>, current: () => boolean): void | Promise<void>;
  /** A failed load; `current` is false when a newer load has begun meanwhile. */
  fail(err: unknown, current: boolean): void;
}

export function reviewPager<T>(opts: ReviewPagerOptions<T>): ReviewPager {
  const { pager, pageSize } = opts;
  let page = 1;
  let total = 0;
  /** Which load is the newest: an older answer arriving late is dropped. */
  let seq = 0;
  const load = async (): Promise<void> => {
    const mine = ++seq;
    // A click while a page loads would only queue another request: the pager waits.
    for (const b of pager.querySelectorAll("button")) b.disabled = true;
    try {
      const data = await api<Page<T>>("GET", `${opts.path}?page=${page}&page_size=${pageSize}`);
      if (mine !== seq) return;
      total = data.total;
      const pages = Math.max(1, Math.ceil(total / pageSize));
      if (page > pages) {
        page = pages;
        return load();
      }
      opts.count.textContent = `${total} ${opts.unit}`;
      renderPager(
        pager,
        page,
        pages,
        (p) => {
          page = p;
          void load();
        },
        { jump: true },
      );
      await opts.show(data, () => mine === seq);
    } catch (err) {
      opts.fail(err, mine === seq);
    }
  };
  return {
    load,
    get total() {
      return total;
    },
  };
}
