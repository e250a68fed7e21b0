// Settings (admins only): the common runtime keys. PUT /api/admin/config is all-or-nothing
// and validates server-side, so only changed keys are sent and a 400 message is shown as is.
import { api } from "./api";
import { busy, errorText, h, replace, toast } from "./dom";
import type { FullConfig, Settings, ViewContext } from "./types";

type Kind = "text" | "int" | "bool" | "widths" | { options: [string, string][] };

interface FieldSpec {
  key: keyof Settings & string;
  label: string;
  hint: string;
  kind: Kind;
}

const FIELDS: FieldSpec[] = [
  { key: "base_url", label: "站点地址", hint: "公开访问地址，不带结尾的 /；留空则按请求推断", kind: "text" },
  { key: "max_upload_mb", label: "单张上限（MB）", hint: "超过时上传返回 413", kind: "int" },
  { key: "exif_policy", label: "EXIF 策略", hint: "去除会删掉 GPS 等隐私信息并保持显示方向", kind: { options: [["strip", "去除 EXIF/GPS"], ["passthrough", "原样保留"]] } },
  { key: "access_mode", label: "原图访问方式", hint: "redirect 会把原图 302 到允许直链的渠道", kind: { options: [["proxy", "代理（proxy）"], ["redirect", "重定向（redirect）"]] } },
  { key: "process_widths", label: "允许的缩放宽度", hint: "逗号分隔，如 320, 640, 1280；留空表示不缩放", kind: "widths" },
  { key: "default_ttl_hours", label: "默认有效期（小时）", hint: "0 表示永久", kind: "int" },
  { key: "allow_empty_referer", label: "允许空 Referer", hint: "防盗链开启时放行不带 Referer 的请求", kind: "bool" },
];

type Control = HTMLInputElement | HTMLSelectElement;

function control(spec: FieldSpec, value: unknown): Control {
  const name = spec.key;
  if (spec.kind === "bool") return h("input", { type: "checkbox", name, checked: value === true });
  if (spec.kind === "int") return h("input", { type: "number", name, step: 1, value: String(value ?? "") });
  if (spec.kind === "widths") return h("input", { name, value: Array.isArray(value) ? value.join(", ") : "" });
  if (spec.kind === "text") return h("input", { name, value: String(value ?? ""), spellcheck: false });
  const select = h("select", { name }, ...spec.kind.options.map(([v, label]) => h("option", { value: v }, label)));
  select.value = String(value);
  return select;
}

/** The value a control holds, in the setting's JSON type; `undefined` when it cannot be parsed. */
function readControl(spec: FieldSpec, el: Control): unknown {
  if (spec.kind === "bool") return (el as HTMLInputElement).checked;
  if (spec.kind === "int") return el.value.trim() === "" ? undefined : Number(el.value);
  if (spec.kind === "widths") {
    const parts = el.value.split(/[,，\s]+/).filter(Boolean);
    if (!parts.length) return null;
    const nums = parts.map(Number);
    return nums.every((n) => Number.isInteger(n)) ? nums : undefined;
  }
  return spec.kind === "text" ? el.value.trim() : el.value;
}

/** Empty width lists and null both mean "no resizing"; compare them as equal. */
function same(a: unknown, b: unknown): boolean {
  const norm = (v: unknown) => (Array.isArray(v) && v.length === 0 ? null : v);
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
}

export function settingsView(ctx: ViewContext): HTMLElement {
  const body = h("div", null, h("p", { class: "muted" }, "加载中…"));

  const render = (full: FullConfig) => {
    const controls = new Map<FieldSpec, Control>();
    const error = h("p", { class: "error", role: "alert", id: "settings-error" });
    const save = h("button", { type: "submit", class: "primary" }, "保存修改");
    const form = h(
      "form",
      { class: "settings", id: "settings-form" },
      ...FIELDS.map((spec) => {
        const el = control(spec, full.settings[spec.key]);
        controls.set(spec, el);
        return h("label", { class: spec.kind === "bool" ? "setting check" : "setting" }, h("span", { class: "label" }, spec.label), el, h("small", { class: "muted" }, spec.hint));
      }),
      error,
      h("div", { class: "actions" }, save),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      error.textContent = "";
      const changes: Record<string, unknown> = {};
      for (const [spec, el] of controls) {
        const value = readControl(spec, el);
        if (value === undefined) {
          error.textContent = `“${spec.label}”的值无效`;
          return;
        }
        if (!same(value, full.settings[spec.key])) changes[spec.key] = value;
      }
      if (!Object.keys(changes).length) {
        toast("没有需要保存的修改");
        return;
      }
      void busy(
        save,
        async () => {
          const updated = await api<FullConfig>("PUT", "/api/admin/config", changes);
          toast(`已保存 ${Object.keys(changes).length} 项，立即生效`);
          render(updated);
          // Other tabs read widths, base_url and limits from the shared context.
          Object.assign(ctx.config, await api<ViewContext["config"]>("GET", "/api/admin/config"));
          ctx.origin = ctx.config.base_url || location.origin;
        },
        (msg) => (error.textContent = msg),
      );
    });
    const b = full.bootstrap;
    replace(
      body,
      form,
      h("h2", null, "启动参数（只读，修改需重启）"),
      h(
        "dl",
        { class: "facts" },
        ...[
          ["监听地址", b.listen],
          ["数据目录", b.data_dir],
          ["可信代理", b.trusted_proxies || "（无）"],
          ["/metrics 允许", b.metrics_allow || "（关闭）"],
        ].flatMap(([k, v]) => [h("dt", null, k!), h("dd", null, h("code", null, v!))]),
      ),
      h("p", { class: "muted" }, "其余配置项可通过 PUT /api/admin/config 修改，见 API 文档。"),
    );
  };

  api<FullConfig>("GET", "/api/admin/config/full").then(render, (err) => replace(body, h("p", { class: "error" }, `加载失败：${errorText(err)}`)));
  return h("section", { class: "view" }, h("h1", null, "设置"), body);
}
