// DOM helpers. Everything is built with createElement/textContent: server data is never
// parsed as HTML, so a file name like `<img onerror=…>` stays text.

export type Child = Node | string | number | null | undefined | false;
type Props = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, props?: Props | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value as EventListener);
    } else if (key === "class") {
      el.className = String(value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key in el && key !== "list" && key !== "form") {
      (el as unknown as Record<string, unknown>)[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

// ---- feedback -------------------------------------------------------------------------

let toastBox: HTMLElement | undefined;

export function toast(message: string, kind: "ok" | "error" = "ok"): void {
  if (!toastBox) {
    toastBox = h("div", { class: "toasts", role: "status", "aria-live": "polite" });
    document.body.append(toastBox);
  }
  const item = h("div", { class: `toast ${kind}` }, message);
  toastBox.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 6000 : 2500);
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs an action with the button disabled; failures become an error toast (or `onError`). */
export async function busy(button: HTMLButtonElement | null, action: () => Promise<void>, onError?: (msg: string) => void): Promise<void> {
  if (button) button.disabled = true;
  try {
    await action();
  } catch (err) {
    if (onError) onError(errorText(err));
    else toast(errorText(err), "error");
  } finally {
    if (button) button.disabled = false;
  }
}

// ---- clipboard ------------------------------------------------------------------------

/** navigator.clipboard needs a secure context; a VPS reached over plain http is not one. */
export async function copyText(text: string): Promise<void> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      toast("已复制");
      return;
    }
  } catch {
    // fall through to the selection-based copy
  }
  const area = h("textarea", { value: text, readOnly: true, class: "offscreen" });
  document.body.append(area);
  area.select();
  const ok = document.execCommand("copy");
  area.remove();
  toast(ok ? "已复制" : "复制失败，请手动选择复制", ok ? "ok" : "error");
}

export function copyButton(label: string, text: () => string): HTMLButtonElement {
  return h("button", { type: "button", class: "small", onclick: () => void copyText(text()) }, label);
}

/** A read-only field with a copy button, for URLs, tokens and snippets. */
export function copyField(label: string, value: string, opts: { multiline?: boolean; name?: string } = {}): HTMLElement {
  const field = opts.multiline
    ? h("textarea", {
        readOnly: true,
        value,
        rows: Math.min(12, value.split("\n").length),
        wrap: "off",
        spellcheck: false,
        dataset: { field: opts.name ?? label },
      })
    : h("input", { readOnly: true, value, spellcheck: false, dataset: { field: opts.name ?? label } });
  field.addEventListener("focus", () => field.select());
  return h(
    "div",
    { class: "copyfield" },
    h("span", { class: "label" }, label),
    field,
    copyButton("复制", () => value),
  );
}

// ---- modal ----------------------------------------------------------------------------

export interface Modal {
  dialog: HTMLDialogElement;
  body: HTMLElement;
  close(): void;
}

export function openModal(title: string, ...content: Child[]): Modal {
  const body = h("div", { class: "modal-body" });
  append(body, ...content);
  const dialog = h(
    "dialog",
    { class: "modal" },
    h("header", null, h("h2", null, title), h("button", { type: "button", class: "icon", "aria-label": "关闭", onclick: () => dialog.close() }, "×")),
    body,
  );
  dialog.addEventListener("close", () => dialog.remove());
  // Click on the backdrop (the dialog element itself, outside its content) closes it.
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) dialog.close();
  });
  document.body.append(dialog);
  dialog.showModal();
  return { dialog, body, close: () => dialog.close() };
}

// ---- formatting -----------------------------------------------------------------------

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "不限";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** Server timestamps are UTC "YYYY-MM-DD HH:MM:SS"; show them in the browser's time zone. */
export function fmtTime(ts: string | null | undefined, empty = "—"): string {
  if (!ts) return empty;
  const d = parseUtc(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toLocaleString("zh-CN", { hour12: false });
}

export function parseUtc(ts: string): Date {
  return new Date(`${ts.replace(" ", "T")}Z`);
}

/** Only http(s) or site-relative links become hrefs. */
export function safeHref(url: string): string | undefined {
  if (url.startsWith("/") && !url.startsWith("//")) return url;
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : undefined;
  } catch {
    return undefined;
  }
}

export function badge(text: string, kind: "ok" | "warn" | "bad" | "muted"): HTMLElement {
  return h("span", { class: `badge ${kind}` }, text);
}
