// Laravel's LengthAwarePaginator as Lsky Pro returns it (Illuminate\Pagination: toArray,
// linkCollection, UrlWindow), with Lsky's zh_CN labels (lang/zh_CN/pagination.php).

/** Pages on each side of the current one (Laravel's default `onEachSide`). */
const ON_EACH_SIDE = 3;
const PREVIOUS = "&laquo; 上一页";
const NEXT = "下一页 &raquo;";

/** One entry of `links`: a page, a "..." gap, or the previous/next arrows. */
interface PageLink {
  url: string | null;
  label: string;
  active: boolean;
}

/**
 * `page` as Laravel's resolveCurrentPage reads it: an integer (FILTER_VALIDATE_INT: optional sign
 * and surrounding whitespace, no leading zeros) of at least 1, else page 1 (`abc`, `0`, `-2`).
 */
export function laravelPage(value: string | undefined): number {
  // PHP trims only space, tab, CR, LF and VT here; \s would also take \f, NBSP and other spaces.
  if (value === undefined || !/^[ \t\r\n\v]*[+-]?(0|[1-9]\d*)[ \t\r\n\v]*$/.test(value)) return 1;
  const page = Number(value.trim());
  return Number.isSafeInteger(page) && page >= 1 ? page : 1;
}

/** PHP's `(int)` of a query value is non-zero: its leading digits (after a sign) are not all zeros. */
export function phpIntIsNonZero(value: string | undefined): boolean {
  return /^\s*[+-]?0*[1-9]/.test(value ?? "");
}

/** rawurlencode, which http_build_query uses under PHP_QUERY_RFC3986: `!'()*` are escaped too. */
const rawUrlEncode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * The URL of page `n` (AbstractPaginator::url): the query the request came with
 * (withQueryString; PHP keeps the last of repeated names, where the first stood) with `page` set.
 */
function pageUrlBuilder(path: string, query: Iterable<[string, string]>) {
  const params = new Map<string, string>();
  for (const [name, value] of query) params.set(name, value);
  return (n: number) => {
    const withPage = new Map(params).set("page", String(Math.max(1, n)));
    return `${path}?${[...withPage].map(([name, value]) => `${rawUrlEncode(name)}=${rawUrlEncode(value)}`).join("&")}`;
  };
}

/**
 * The page numbers `links` shows (UrlWindow::get): all of them below 14 pages, else the first
 * pages, the current one with 3 on each side and the last pages, with `null` for each "..." gap.
 */
export function pageWindow(current: number, last: number): (number | null)[] {
  const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
  if (last < ON_EACH_SIDE * 2 + 8) return range(1, last);
  const window = ON_EACH_SIDE + 4;
  if (current <= window) return [...range(1, window + ON_EACH_SIDE), null, last - 1, last];
  if (current > last - window) return [1, 2, null, ...range(last - (window + ON_EACH_SIDE - 1), last)];
  return [1, 2, null, ...range(current - ON_EACH_SIDE, current + ON_EACH_SIDE), null, last - 1, last];
}

/** Laravel's LengthAwarePaginator::toArray, which Lsky returns for images and albums. */
export function lskyPage<T>(items: T[], total: number, page: number, perPage: number, path: string, query: Iterable<[string, string]> = []) {
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  const pageUrl = pageUrlBuilder(path, query);
  const prev = page > 1 ? pageUrl(page - 1) : null;
  const next = page < lastPage ? pageUrl(page + 1) : null;
  const pages: PageLink[] = pageWindow(page, lastPage).map((n) =>
    n === null ? { url: null, label: "...", active: false } : { url: pageUrl(n), label: String(n), active: n === page },
  );
  const from = items.length ? (page - 1) * perPage + 1 : null;
  return {
    current_page: page,
    data: items,
    first_page_url: pageUrl(1),
    from,
    last_page: lastPage,
    last_page_url: pageUrl(lastPage),
    links: [{ url: prev, label: PREVIOUS, active: false }, ...pages, { url: next, label: NEXT, active: false }],
    next_page_url: next,
    path,
    per_page: perPage,
    prev_page_url: prev,
    to: from === null ? null : from + items.length - 1,
    total,
  };
}
