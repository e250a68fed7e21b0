// Small building blocks the pages share: tables (that become cards on a phone), page-number
// pagers, statistic tiles, labelled form fields and UTC/local time conversion for filters.
import { h, replace, type Child } from "./dom";

/** A table with a header row; `tbody` is filled by the caller. */
export function dataTable(id: string, headers: string[]): { table: HTMLTableElement; tbody: HTMLTableSectionElement } {
  const tbody = h("tbody");
  const table = h("table", { class: "table", id }, h("thead", null, h("tr", null, ...headers.map((t) => h("th", { scope: "col" }, t)))), tbody);
  return { table, tbody };
}

/** One full-width message row (empty list, loading, error). */
export function messageRow(columns: number, text: string, cls = "empty"): HTMLTableRowElement {
  return h("tr", { class: "message-row" }, h("td", { colSpan: columns, class: cls }, text));
}

/** Page numbers around the current page, with first/last and gaps: 1 … 4 5 [6] 7 8 … 20. */
export function pageNumbers(page: number, pages: number): (number | "…")[] {
  const out: (number | "…")[] = [];
  for (let p = 1; p <= pages; p++) {
    if (p === 1 || p === pages || Math.abs(p - page) <= 2) out.push(p);
    else if (out.at(-1) !== "…") out.push("…");
  }
  return out;
}

/**
 * ‹ 1 … 4 5 [6] 7 8 … 20 ›. With `jump`, also a "go to page" field for lists too long to click
 * through (page 5000 of 40000 is one entry, not 2500 clicks).
 */
export function renderPager(box: HTMLElement, page: number, pages: number, go: (page: number) => void, opts: { jump?: boolean } = {}): void {
  if (pages <= 1) {
    replace(box);
    return;
  }
  let jump: HTMLElement | null = null;
  if (opts.jump) {
    const input = h("input", {
      type: "number",
      name: "goto_page",
      min: 1,
      max: pages,
      step: 1,
      class: "narrow",
      "aria-label": `跳到第几页（1–${pages}）`,
      placeholder: "页码",
    });
    jump = h("form", { class: "pager-jump", novalidate: true }, input, h("button", { type: "submit", class: "small" }, "跳转"));
    jump.addEventListener("submit", (e) => {
      e.preventDefault();
      const p = Number(input.value);
      if (!Number.isInteger(p) || p < 1 || p > pages) {
        input.setCustomValidity(`请输入 1 到 ${pages} 之间的页码`);
        input.reportValidity();
        return;
      }
      go(p);
    });
    input.addEventListener("input", () => input.setCustomValidity(""));
  }
  replace(
    box,
    h("button", { type: "button", class: "small", disabled: page <= 1, onclick: () => go(page - 1), "aria-label": "上一页" }, "‹ 上一页"),
    ...pageNumbers(page, pages).map((p) =>
      p === "…"
        ? h("span", { class: "muted" }, "…")
        : h(
            "button",
            {
              type: "button",
              class: p === page ? "small primary" : "small",
              "aria-current": p === page ? "page" : undefined,
              dataset: { page: String(p) },
              onclick: () => go(p),
            },
            p,
          ),
    ),
    h("button", { type: "button", class: "small", disabled: page >= pages, onclick: () => go(page + 1), "aria-label": "下一页" }, "下一页 ›"),
    jump,
  );
}

export function stat(label: string, value: Child, note?: Child, id?: string): HTMLElement {
  return h(
    "div",
    { class: "stat", id },
    h("div", { class: "stat-label" }, label),
    h("div", { class: "stat-value" }, value),
    note ? h("div", { class: "stat-note muted" }, note) : null,
  );
}

/** A label wrapping its control, with an optional hint and a per-field error line. */
export function labelled(label: string, control: HTMLElement, hint?: string): { el: HTMLElement; error: HTMLElement } {
  const error = h("small", { class: "field-error", role: "alert" });
  const el = h("label", { class: "field" }, h("span", null, label), control, hint ? h("small", { class: "muted" }, hint) : null, error);
  return { el, error };
}

const pad = (n: number) => String(n).padStart(2, "0");

/** A `datetime-local` value (browser time) as the server's UTC "YYYY-MM-DD HH:MM:SS"; "" stays "". */
export function localInputToUtc(value: string): string {
  if (!value) return "";
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return "";
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

export function percent(part: number, whole: number | null): number {
  return whole ? Math.min(100, Math.round((part / whole) * 100)) : 0;
}

/** Filters carried in the hash after the page id: `#images?user=<id>`. */
export function hashParams(): URLSearchParams {
  return new URLSearchParams(location.hash.split("?")[1] ?? "");
}

/** The longest lifetime any hours field takes: 100 years, the cap the server's schema puts on durations. */
export const MAX_HOURS = 876_000;

/**
 * What is wrong with an hours field's text, or "" when it is a number of hours in [min, MAX_HOURS]
 * (whole hours when `integer`). Checked here because an empty number field reads as 0 — which means
 * "permanent" to the API — and the server's own message speaks in seconds.
 */
export function hoursProblem(raw: string, min: 0 | 1, integer: boolean): string {
  const text = raw.trim();
  const n = Number(text);
  if (text !== "" && Number.isFinite(n) && n >= min && n <= MAX_HOURS && (!integer || Number.isInteger(n))) return "";
  return `请填写 ${min} 到 ${MAX_HOURS} 之间的${integer ? "整数" : ""}小时数${min === 0 ? "（0 为永久）" : ""}`;
}

/** A lifetime in the hours the fields use, to the minute ("20 分钟", "1 小时 30 分钟", "48 小时"). */
export function fmtDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} 秒`;
  const [hr, m] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60)];
  return [hr ? `${hr} 小时` : "", m ? `${m} 分钟` : ""].filter(Boolean).join(" ");
}

let queryWritten: ((hash: string) => void) | undefined;

/** The shell's hook: it learns each page's current link (its tab link and "already shown" mark follow it). */
export function onPageQuery(handler: (hash: string) => void): void {
  queryWritten = handler;
}

/**
 * Puts a page's filters into its link (`#images?search=cat&page=2`), replacing the history entry, so a
 * reload, the back button and the tab link bring the same view back. Empty values are left out. Ignored
 * once another page is shown: a late answer must not rewrite that page's link.
 */
export function setPageQuery(pageId: string, params: Record<string, string | number | undefined>): void {
  if (location.hash.slice(1).split("?")[0] !== pageId) return;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const text = q.toString();
  const hash = text ? `${pageId}?${text}` : pageId;
  if (location.hash.slice(1) !== hash) history.replaceState(history.state, "", `#${hash}`);
  queryWritten?.(hash);
}

/** A positive page number from the link, else 1. */
export function pageParam(params: URLSearchParams): number {
  const p = Number(params.get("page"));
  return Number.isInteger(p) && p > 0 ? p : 1;
}
