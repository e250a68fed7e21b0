// #settings (admins): every runtime key, grouped, with units. PUT /api/admin/config is
// all-or-nothing and names the offending key in its 400 message ("配置项 <key> 的值无效"),
// so that message is shown on the field that caused it. Leaving with unsaved edits asks first.
import { api } from "./api";
import { busy, errorText, h, replace, toast } from "./dom";
import { setLeaveGuard } from "./leave-guard";
import { SETTING_GROUPS, type SettingSpec } from "./settings-fields";
import type { FullConfig, ViewContext } from "./types";

type Control = HTMLInputElement | HTMLSelectElement | HTMLFieldSetElement;

function control(spec: SettingSpec, value: unknown): Control {
  const name = spec.key;
  const kind = spec.kind;
  if (kind === "bool") return h("input", { type: "checkbox", name, id: `set-${name}`, checked: value === true });
  if (kind === "int")
    return h("input", { type: "number", name, id: `set-${name}`, step: 1, min: spec.min, max: spec.max, value: String(value ?? ""), inputMode: "numeric" });
  if (kind === "widths") return h("input", { name, id: `set-${name}`, value: Array.isArray(value) ? value.join(", ") : "" });
  if (kind === "text") return h("input", { name, id: `set-${name}`, value: String(value ?? ""), spellcheck: false });
  if (kind === "secret") return h("input", { type: "password", name, id: `set-${name}`, value: "", autocomplete: "new-password" });
  if ("multi" in kind) {
    const chosen = new Set(Array.isArray(value) ? value.map(String) : []);
    return h(
      "fieldset",
      { class: "multi", id: `set-${name}` },
      ...kind.multi.map((v) => h("label", { class: "inline-check" }, h("input", { type: "checkbox", value: v, checked: chosen.has(v) }), v)),
    );
  }
  const select = h("select", { name, id: `set-${name}` }, ...kind.options.map(([v, label]) => h("option", { value: v }, label)));
  select.value = String(value);
  return select;
}

/** The control's value in the setting's JSON type; `undefined` when it cannot be parsed. */
function readControl(spec: SettingSpec, el: Control): unknown {
  const kind = spec.kind;
  if (kind === "bool") return (el as HTMLInputElement).checked;
  if (el instanceof HTMLFieldSetElement) return [...el.querySelectorAll<HTMLInputElement>("input:checked")].map((i) => i.value);
  if (kind === "int") {
    const v = el.value.trim();
    return v === "" || !/^-?\d+$/.test(v) ? undefined : Number(v);
  }
  if (kind === "widths") {
    const parts = el.value.split(/[,，\s]+/).filter(Boolean);
    if (!parts.length) return null;
    const nums = parts.map(Number);
    return nums.every((n) => Number.isInteger(n)) ? nums : undefined;
  }
  return kind === "text" ? el.value.trim() : el.value;
}

/** The accepted range of an integer setting, as its hint and in its error: "允许 1–10240". */
function rangeText(spec: SettingSpec): string {
  return spec.min === undefined || spec.max === undefined ? "" : `允许 ${spec.min}–${spec.max}`;
}

/** The hint under a field: its own text, then its range (integers) or whether a secret is set. */
function hintText(spec: SettingSpec, full: FullConfig): string {
  if (spec.kind === "secret") return `${full.derived.cdn_api_token_set ? "已设置。" : "未设置。"}${spec.hint ?? ""}`;
  return [spec.hint, rangeText(spec)].filter(Boolean).join("；");
}

/**
 * Whether deletes really purge the CDN (derived.cdn_purge_enabled) and, when not, which of the three
 * settings it needs is missing: a takedown must not be believed purged while /i/ stays cached for a year.
 */
function cdnState(full: FullConfig): HTMLElement {
  if (full.derived.cdn_purge_enabled)
    return h("p", { class: "ok-text", id: "cdn-purge-state" }, "CDN 缓存清除：已开启。删除图片时会清除其在 Cloudflare 上的缓存。");
  const missing = [
    full.settings.base_url ? "" : "站点地址",
    full.settings.cdn_provider_zone_id ? "" : "CDN Zone ID",
    full.derived.cdn_api_token_set ? "" : "CDN API 令牌",
  ].filter(Boolean);
  return h(
    "p",
    { class: "warn-text", id: "cdn-purge-state" },
    `CDN 缓存清除：未开启（缺少${missing.join("、")}）。删除图片时不会清除 CDN 缓存；如果站点前面有 CDN，已删除的图片可能仍被缓存，最长一年。`,
  );
}

/** Empty width lists and null both mean "no resizing"; compare them as equal. */
function same(a: unknown, b: unknown): boolean {
  const norm = (v: unknown) => (Array.isArray(v) && v.length === 0 ? null : v);
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
}

export function settingsView(ctx: ViewContext): HTMLElement {
  const body = h("div", null, h("p", { class: "muted" }, "加载中…"));

  const render = (full: FullConfig) => {
    const settings = full.settings as unknown as Record<string, unknown>;
    const controls = new Map<SettingSpec, { el: Control; error: HTMLElement; row: HTMLElement }>();
    const clearToken = h("input", { type: "checkbox", name: "clear_cdn_token" });
    const formError = h("p", { class: "error", role: "alert", id: "settings-error" });
    const save = h("button", { type: "submit", class: "primary" }, "保存修改");
    const dirtyNote = h("span", { class: "warn-text", id: "settings-dirty", hidden: true }, "有未保存的修改");

    const changes = (): Record<string, unknown> | string => {
      const out: Record<string, unknown> = {};
      for (const [spec, { el }] of controls) {
        if (spec.kind === "secret") {
          if (clearToken.checked) out[spec.key] = "";
          else if ((el as HTMLInputElement).value !== "") out[spec.key] = (el as HTMLInputElement).value;
          continue;
        }
        const value = readControl(spec, el);
        if (value === undefined) return spec.key;
        if (!same(value, settings[spec.key])) out[spec.key] = value;
      }
      return out;
    };
    const isDirty = () => {
      const c = changes();
      return typeof c === "string" || Object.keys(c).length > 0;
    };
    setLeaveGuard(isDirty);

    const showFieldError = (key: string, message: string) => {
      for (const [spec, { error, row, el }] of controls) {
        if (spec.key !== key) continue;
        error.textContent = message;
        row.classList.add("invalid");
        el.setAttribute("aria-invalid", "true");
        el.focus();
        return true;
      }
      return false;
    };
    const clearErrors = () => {
      formError.textContent = "";
      for (const { error, row, el } of controls.values()) {
        error.textContent = "";
        row.classList.remove("invalid");
        el.removeAttribute("aria-invalid");
      }
    };

    const groups = SETTING_GROUPS.map((g) =>
      h(
        "fieldset",
        { class: "setting-group", id: `group-${g.id}` },
        h("legend", null, g.title),
        g.id === "alerts" ? cdnState(full) : null,
        ...g.fields.map((spec) => {
          const el = control(spec, settings[spec.key]);
          const error = h("small", { class: "field-error", role: "alert" });
          const label = h("label", { htmlFor: el.id, class: "setting-label" }, spec.label, spec.unit ? h("span", { class: "unit" }, `（${spec.unit}）`) : null);
          const row = h(
            "div",
            { class: spec.kind === "bool" ? "setting check" : "setting", dataset: { key: spec.key } },
            label,
            h("div", { class: "setting-control" }, el, spec.kind === "secret" ? h("label", { class: "inline-check" }, clearToken, "清除") : null),
            hintText(spec, full) ? h("small", { class: "muted" }, hintText(spec, full)) : null,
            error,
          );
          controls.set(spec, { el, error, row });
          return row;
        }),
      ),
    );
    const form = h(
      "form",
      { class: "settings", id: "settings-form", novalidate: true },
      ...groups,
      formError,
      h("div", { class: "actions sticky-actions" }, save, dirtyNote),
    );
    form.addEventListener("input", () => (dirtyNote.hidden = !isDirty()));
    form.addEventListener("change", () => (dirtyNote.hidden = !isDirty()));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      clearErrors();
      const c = changes();
      if (typeof c === "string") {
        showFieldError(c, "请输入整数");
        formError.textContent = "有无效的值，请检查标出的字段";
        return;
      }
      if (!Object.keys(c).length) {
        toast("没有需要保存的修改");
        return;
      }
      void busy(
        save,
        async () => {
          const updated = await api<FullConfig>("PUT", "/api/admin/config", c);
          toast(`已保存 ${Object.keys(c).length} 项，立即生效`);
          render(updated);
          // Other pages read widths, base_url and limits from the shared context.
          Object.assign(ctx.config, await api<ViewContext["config"]>("GET", "/api/admin/config"));
          ctx.origin = ctx.config.base_url || location.origin;
        },
        (msg) => {
          const key = /配置项 ([a-z_0-9]+)/.exec(msg)?.[1];
          const spec = SETTING_GROUPS.flatMap((g) => g.fields).find((f) => f.key === key);
          // The server names the key but not its range: add it for integers.
          const text = spec && rangeText(spec) && !msg.includes("允许") ? `${msg}（${rangeText(spec)}）` : msg;
          if (!key || !showFieldError(key, text)) formError.textContent = msg;
          else formError.textContent = "保存失败，请检查标出的字段";
        },
      );
    });
    const b = full.bootstrap;
    replace(
      body,
      h(
        "nav",
        { class: "group-links", "aria-label": "设置分组" },
        ...SETTING_GROUPS.map((g) =>
          h(
            "a",
            {
              href: `#settings`,
              onclick: (e: Event) => {
                e.preventDefault();
                document.getElementById(`group-${g.id}`)?.scrollIntoView();
              },
            },
            g.title,
          ),
        ),
      ),
      form,
      h("h2", null, "启动参数（只读，修改需重启）"),
      h(
        "dl",
        { class: "facts" },
        ...[
          ["监听地址", b.listen],
          ["数据目录", b.data_dir],
          ["可信代理", b.trusted_proxies || "（无）"],
          // Where to scrape and who may: the allowlist alone did not say either (audit 15 LOW-10).
          ["/metrics 抓取", b.metrics_allow ? `GET ${location.origin}/metrics（仅限 KURA_METRICS_ALLOW）` : "已关闭（KURA_METRICS_ALLOW 为空）"],
          ["/metrics 允许", b.metrics_allow || "（无）"],
          ["登录限流", `${full.derived.login_burst} 次，每 ${full.derived.login_refill_seconds} 秒恢复一次`],
          ["渠道对账间隔", `${full.derived.reconcile_interval_seconds} 秒`],
        ].flatMap(([k, v]) => [h("dt", null, k!), h("dd", null, h("code", null, v!))]),
      ),
    );
  };

  api<FullConfig>("GET", "/api/admin/config/full").then(render, (err) => replace(body, h("p", { class: "error" }, `加载失败：${errorText(err)}`)));
  return h("section", { class: "view" }, h("h1", null, "设置"), body);
}
