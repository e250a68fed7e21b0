// Hotlink protection allowlist (admins only). An empty list switches protection off.
import { api } from "./api";
import { busy, errorText, fmtTime, h, replace, toast } from "./dom";
import type { Page, RefererRule, ViewContext } from "./types";

export function referersView(_ctx: ViewContext): HTMLElement {
  const list = h("tbody");
  const state = h("p", { class: "muted" });

  const row = (r: RefererRule): HTMLElement => {
    const del = h("button", { type: "button", class: "small danger" }, "删除");
    del.addEventListener(
      "click",
      () =>
        void busy(del, async () => {
          await api("DELETE", `/api/admin/referer-whitelist/${r.id}`);
          toast("已删除");
          await load();
        }),
    );
    return h(
      "tr",
      { dataset: { pattern: r.pattern } },
      h("td", null, h("code", null, r.pattern)),
      h("td", null, fmtTime(r.created_at)),
      h("td", { class: "row-actions" }, del),
    );
  };

  async function load(): Promise<void> {
    try {
      const data = await api<Page<RefererRule>>("GET", "/api/admin/referer-whitelist");
      state.textContent = data.total
        ? `防盗链已开启：只有来自下列域名的页面可以引用图片（是否放行空 Referer 见“设置”）。`
        : "白名单为空，防盗链处于关闭状态，任何网站都可以引用图片。";
      replace(list, ...data.items.map(row));
    } catch (err) {
      replace(list, h("tr", null, h("td", { colSpan: 3, class: "error" }, `加载失败：${errorText(err)}`)));
    }
  }

  const pattern = h("input", {
    name: "pattern",
    "aria-label": "允许的来源域名",
    placeholder: "example.com 或 *.example.com",
    required: true,
    spellcheck: false,
  });
  const add = h("button", { type: "submit", class: "primary" }, "添加");
  const form = h("form", { class: "inline", id: "referer-form" }, pattern, add);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void busy(add, async () => {
      await api<RefererRule>("POST", "/api/admin/referer-whitelist", { pattern: pattern.value.trim() });
      form.reset();
      toast("已添加");
      await load();
    });
  });

  void load();
  return h(
    "section",
    { class: "view" },
    h("h1", null, "防盗链白名单"),
    state,
    h("p", { class: "muted" }, "裸域名精确匹配；*.domain 只匹配其子域名。修改立即生效。"),
    form,
    h(
      "table",
      { class: "table", id: "referer-table" },
      h("thead", null, h("tr", null, h("th", null, "规则"), h("th", null, "添加时间"), h("th", null, ""))),
      list,
    ),
  );
}
