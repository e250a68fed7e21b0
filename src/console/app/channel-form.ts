// The create/edit dialog of a storage channel: template fields (types, required, options),
// masked secrets with the keep-sentinel handled for the person, OAuth authorisation for the
// cloud drives, "test" before saving (a token the test refreshed goes into the form, so the save
// does not store the stale one), priority, direct links and the immutable encrypted flag. Besides
// the templates, a custom channel (rclone backend + parameters, channel-custom.ts) on create and edit.
import { api } from "./api";
import { CUSTOM, type CustomFields, customFields, readCustomConfig, withToken } from "./channel-custom";
import { busy, h, openModal, toast } from "./dom";
import { CATEGORY_NAMES, fieldLabel, TEMPLATE_NAMES } from "./labels";
import type { Channel, ChannelConfigView, ChannelTemplate, ChannelTestResult, ViewContext } from "./types";

/** What the server sends instead of a stored secret, and accepts back as "keep it". */
export const SECRET_KEEP = "__kura_secret_keep__";

type Field = ChannelTemplate["fields"][number];
type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

function fieldControl(f: Field, value: string): Control {
  const name = `in_${f.key}`;
  if (f.type === "select") {
    const sel = h("select", { name }, f.required ? null : h("option", { value: "" }, "（默认）"), ...f.options.map((o) => h("option", { value: o }, o)));
    sel.value = value;
    return sel;
  }
  if (f.type === "bool") return h("input", { type: "checkbox", name, checked: value === "true" });
  if (f.key === "key_pem" || f.key === "token") return h("textarea", { name, rows: 3, value: value === SECRET_KEEP ? "" : value, spellcheck: false });
  if (f.type === "password") return h("input", { type: "password", name, value: value === SECRET_KEEP ? "" : value, autocomplete: "new-password" });
  return h("input", { type: f.type === "int" ? "number" : "text", name, value, spellcheck: false, min: f.type === "int" ? 0 : undefined });
}

interface FormState {
  template: ChannelTemplate | undefined;
  controls: Map<string, Control>;
  /** Keys whose stored value is hidden: empty input means "keep". */
  masked: Set<string>;
  /** Set while "custom" is chosen. */
  custom?: CustomFields;
}

function readInputs(state: FormState): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, el] of state.controls) {
    const value = el instanceof HTMLInputElement && el.type === "checkbox" ? (el.checked ? "true" : "") : el.value;
    if (value.trim() === "" && state.masked.has(key)) out[key] = SECRET_KEEP;
    else if (value.trim() !== "") out[key] = value;
  }
  return out;
}

/**
 * A probe that refreshed a newly entered OAuth token answers the new one: the provider may have
 * retired the old refresh token with it (OneDrive rotates them), so it replaces the form's token.
 */
function applyRefreshedToken(state: FormState, token: string): void {
  if (state.custom) {
    state.custom.config.value = withToken(state.custom.config.value, token);
    return;
  }
  const el = state.controls.get("token");
  if (!el) return;
  el.value = token;
  state.masked.delete("token");
}

export interface ChannelFormOptions {
  ctx: ViewContext;
  templates: ChannelTemplate[];
  /** Editing an existing channel: its public description and masked config. */
  existing?: { channel: Channel; view: ChannelConfigView };
  saved(): void;
}

export function openChannelForm(opts: ChannelFormOptions): void {
  const { templates, existing } = opts;
  const editing = !!existing;
  const name = h("input", { name: "channel_name", required: true, maxLength: 64, value: existing?.channel.name ?? "", autocomplete: "off" });
  const priority = h("input", { type: "number", name: "priority", step: 1, value: String(existing?.channel.priority ?? 0), class: "narrow" });
  const direct = h("input", { type: "checkbox", name: "allow_direct_link", checked: existing?.channel.allow_direct_link ?? false });
  const encrypted = h("input", {
    type: "checkbox",
    name: "encrypted",
    checked: existing ? existing.channel.encrypted : opts.ctx.config.encrypt_new_channels,
    disabled: editing,
  });
  const autoBucket = h("input", { type: "checkbox", name: "auto_create_bucket" });
  const templateSelect = h(
    "select",
    { name: "template", disabled: editing },
    ...Object.entries(CATEGORY_NAMES).map(([cat, label]) =>
      h("optgroup", { label }, ...templates.filter((t) => t.category === cat).map((t) => h("option", { value: t.id }, TEMPLATE_NAMES[t.id] ?? t.id))),
    ),
    // Custom is a choice when creating; when editing (the select is fixed) only for a custom channel.
    !editing ? h("option", { value: CUSTOM }, "自定义（rclone 驱动与配置）") : null,
    editing && !existing.view.template ? h("option", { value: CUSTOM }, `自定义（${existing.view.driver}）`) : null,
  );
  templateSelect.value = existing ? existing.view.template || CUSTOM : "local";
  const fieldsBox = h("div", { class: "stack", id: "template-fields" });
  const result = h("p", { class: "test-result", role: "status", id: "channel-test-result" });
  const error = h("p", { class: "error", role: "alert", id: "channel-form-error" });
  const state: FormState = { template: undefined, controls: new Map(), masked: new Set() };

  const renderFields = () => {
    const t = templates.find((x) => x.id === templateSelect.value);
    state.template = t;
    state.controls.clear();
    state.masked.clear();
    state.custom = undefined;
    fieldsBox.replaceChildren();
    const values: Record<string, string> = existing && existing.view.template === templateSelect.value ? (existing.view.inputs ?? {}) : {};
    if (!t) {
      // Custom: driver + config. Editing shows the stored (masked) parameters; the template select is fixed then.
      state.custom = customFields(templates, existing && { driver: existing.view.driver, config: existing.view.config });
      fieldsBox.append(...state.custom.box);
      return;
    }
    for (const f of t.fields) {
      const value = values[f.key] ?? "";
      if (value === SECRET_KEEP) state.masked.add(f.key);
      const el = fieldControl(f, value);
      state.controls.set(f.key, el);
      const [label, hint] = fieldLabel(f.key);
      const note = state.masked.has(f.key) ? "已保存，留空保持不变；填写则替换" : hint;
      if (state.masked.has(f.key) && "placeholder" in el) el.placeholder = "••••••（已保存）";
      if (f.required && !state.masked.has(f.key) && f.type !== "bool") el.required = true;
      fieldsBox.append(
        h(
          "label",
          { class: f.type === "bool" ? "field check" : "field", dataset: { key: f.key } },
          h("span", null, label, f.required ? h("span", { class: "req", "aria-hidden": "true" }, " *") : null),
          el,
          note ? h("small", { class: "muted" }, note) : null,
        ),
      );
    }
    if (t.requires_oauth) fieldsBox.append(oauthRow(t));
  };

  const oauthRow = (t: ChannelTemplate): HTMLElement => {
    const button = h("button", { type: "button", id: "oauth-start" }, "授权…");
    const status = h(
      "span",
      { class: "muted" },
      "在新窗口登录服务商并同意授权，令牌会自动填入。应用的回调地址填写 ",
      h("code", null, `${opts.ctx.origin}/api/admin/channel-oauth/callback`),
    );
    button.addEventListener(
      "click",
      () =>
        void busy(button, async () => {
          const inputs = readInputs(state);
          delete inputs.token;
          const started = await api<{ auth_url: string; state: string }>("POST", "/api/admin/channel-oauth/start", {
            template: t.id,
            inputs,
            channel_id: existing?.channel.id ?? 0,
          });
          window.open(started.auth_url, "_blank", "noopener");
          status.textContent = "等待授权完成…（完成后回到本页）";
          for (let i = 0; i < 300; i++) {
            await new Promise((r) => setTimeout(r, 2000));
            if (!button.isConnected) return;
            const res = await api<{ pending: boolean; token?: string; error?: string }>(
              "GET",
              `/api/admin/channel-oauth/result?state=${encodeURIComponent(started.state)}`,
            );
            if (res.pending) continue;
            if (res.error) throw new Error(`授权失败：${res.error}`);
            const tokenEl = state.controls.get("token");
            if (tokenEl && res.token) tokenEl.value = res.token;
            state.masked.delete("token");
            status.textContent = "已取得授权令牌，请测试后保存";
            return;
          }
          throw new Error("等待授权超时，请重试");
        }),
    );
    return h("div", { class: "oauth-row" }, button, status);
  };

  const body = (): Record<string, unknown> => {
    const out: Record<string, unknown> = { name: name.value.trim(), priority: Number(priority.value) || 0, allow_direct_link: direct.checked };
    if (state.template) {
      out.template = state.template.id;
      out.inputs = readInputs(state);
    } else if (state.custom) {
      out.driver = state.custom.driver.value;
      out.config = readCustomConfig(state.custom.config.value);
    }
    if (!editing) {
      out.encrypted = encrypted.checked;
      if (autoBucket.checked && state.template?.driver === "s3") out.auto_create_bucket = true;
    }
    return out;
  };

  const testButton = h("button", { type: "button", id: "channel-test" }, "测试连接");
  testButton.addEventListener("click", () => {
    result.textContent = "测试中…";
    result.className = "test-result muted";
    void busy(
      testButton,
      async () => {
        const r = await api<ChannelTestResult>("POST", "/api/admin/channels/test", { ...body(), channel_id: existing?.channel.id ?? 0 });
        // Also after a failed probe: the refresh itself happened, and the old token may be void now.
        if (r.token) applyRefreshedToken(state, r.token);
        const refreshed = r.token ? "（授权令牌已刷新并填入表单，保存时一并保存）" : "";
        result.textContent = (r.ok ? "连接成功：读写测试通过" : `连接失败：${r.error ?? "未知原因"}`) + refreshed;
        result.className = r.ok ? "test-result ok-text" : "test-result bad-text";
      },
      (msg) => {
        result.textContent = `测试失败：${msg}`;
        result.className = "test-result bad-text";
      },
    );
  });
  const save = h("button", { type: "submit", class: "primary" }, editing ? "保存修改" : "创建渠道");
  const form = h(
    "form",
    { class: "stack channel-form", id: "channel-form" },
    h("label", { class: "field" }, h("span", null, "模板"), templateSelect, editing ? h("small", { class: "muted" }, "渠道类型创建后不能更改") : null),
    h("label", { class: "field" }, h("span", null, "名称", h("span", { class: "req" }, " *")), name),
    fieldsBox,
    h("label", { class: "field" }, h("span", null, "优先级"), priority, h("small", { class: "muted" }, "越大越优先：新图片同步写入优先级最高的健康渠道")),
    h("label", { class: "field check" }, direct, h("span", null, "允许直链（原图 302 到 public_base_url；加密渠道不能开启）")),
    h(
      "label",
      { class: "field check" },
      encrypted,
      h("span", null, editing ? `加密：${existing!.channel.encrypted ? "是" : "否"}（创建后不可更改）` : "加密存储（创建后不可更改）"),
    ),
    editing ? null : h("label", { class: "field check" }, autoBucket, h("span", null, "创建时自动创建存储桶（仅 S3，需要相应权限）")),
    result,
    error,
    h("div", { class: "actions" }, testButton, save),
  );
  templateSelect.addEventListener("change", renderFields);
  renderFields();
  const modal = openModal(editing ? `编辑渠道 · ${existing!.channel.name}` : "新建存储渠道", form);
  modal.dialog.classList.add("wide");
  modal.dialog.id = "channel-dialog";
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    error.textContent = "";
    void busy(
      save,
      async () => {
        const payload = body();
        if (editing) await api<Channel>("PUT", `/api/admin/channels/${existing!.channel.id}`, payload);
        else await api<Channel>("POST", "/api/admin/channels", payload);
        modal.close();
        toast(editing ? "渠道已保存" : "渠道已创建");
        opts.saved();
      },
      (msg) => (error.textContent = msg),
    );
  });
  name.focus();
}
