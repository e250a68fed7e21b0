// #users (admins): list with usage, create, edit (quota, default TTL, role, disabled), reset
// password, delete, and a link to the person's images.
import { api } from "./api";
import { badge, busy, errorText, fmtBytes, fmtTime, h, openModal, replace, toast } from "./dom";
import { hoursProblem, labelled, MAX_HOURS, percent } from "./ui";
import type { Page, User, ViewContext } from "./types";

const MB = 1024 * 1024;

function resetPassword(user: User): void {
  const pw = h("input", { type: "password", name: "reset_password", minLength: 8, required: true, autocomplete: "new-password" });
  const error = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "重置");
  const form = h("form", { class: "stack" }, h("label", { class: "field" }, h("span", null, "新密码（至少 8 位）"), pw), error, submit);
  const modal = openModal(`重置密码 · ${user.name}`, h("p", { class: "muted" }, "该用户的所有会话会立即失效。"), form);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void busy(
      submit,
      async () => {
        await api("POST", `/api/admin/users/${encodeURIComponent(user.id)}/password`, { password: pw.value });
        modal.close();
        toast(`已重置 ${user.name} 的密码`);
      },
      (msg) => (error.textContent = msg),
    );
  });
  pw.focus();
}

/** Everything PUT /api/admin/users/{id} takes, in one dialog (the API replaces the whole record). */
function editUser(ctx: ViewContext, user: User, saved: () => void): void {
  const self = user.id === ctx.me.user.id;
  const name = h("input", { name: "edit_name", value: user.name, required: true, maxLength: 64 });
  const role = h("select", { name: "edit_role", disabled: self }, h("option", { value: "user" }, "普通用户"), h("option", { value: "admin" }, "管理员"));
  role.value = user.role;
  const quota = h("input", {
    name: "edit_quota",
    type: "number",
    min: 0,
    step: "any",
    value: user.quota_bytes === null ? "" : String(+(user.quota_bytes / MB).toFixed(2)),
  });
  const ttl = h(
    "select",
    { name: "edit_ttl_mode" },
    h("option", { value: "inherit" }, "跟随全局设置"),
    h("option", { value: "forever" }, "永久"),
    h("option", { value: "hours" }, "指定小时数"),
  );
  ttl.value = user.default_ttl_hours === null ? "inherit" : user.default_ttl_hours === 0 ? "forever" : "hours";
  const hours = h("input", {
    name: "edit_ttl_hours",
    type: "number",
    min: 1,
    max: MAX_HOURS,
    step: 1,
    value: user.default_ttl_hours ? String(user.default_ttl_hours) : "",
    class: "narrow",
    "aria-label": "默认有效期（小时）",
  });
  const hoursError = h("small", { class: "field-error", role: "alert", id: "edit-ttl-error" });
  /**
   * In 指定小时数 mode the field must hold 1 or more whole hours: an empty number field reads as 0,
   * which the API takes as "permanent" (the 永久 choice is there for that). The custom validity stops
   * the submit; the line under the field says why.
   */
  const checkHours = (): string => {
    const problem = ttl.value === "hours" ? hoursProblem(hours.validity.badInput ? "x" : hours.value, 1, true) : "";
    hours.setCustomValidity(problem);
    if (!problem) hoursError.textContent = "";
    return problem;
  };
  hours.addEventListener("invalid", () => (hoursError.textContent = hours.validationMessage));
  hours.addEventListener("input", checkHours);
  const syncTtl = () => {
    hours.hidden = ttl.value !== "hours";
    checkHours();
  };
  ttl.addEventListener("change", syncTtl);
  syncTtl();
  const disabled = h("input", { type: "checkbox", name: "edit_disabled", checked: user.disabled, disabled: self });
  const error = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "保存");
  const form = h(
    "form",
    { class: "stack", id: "user-edit-form" },
    labelled("用户名", name).el,
    labelled("角色", role, self ? "不能修改自己的角色" : undefined).el,
    labelled("配额（MB）", quota, `留空表示不限；当前已用 ${fmtBytes(user.used_bytes)}`).el,
    h("label", { class: "field" }, h("span", null, "默认有效期"), h("span", { class: "inline" }, ttl, hours), hoursError),
    h("label", { class: "field check" }, disabled, h("span", null, "停用（停用后无法登录，令牌失效）")),
    error,
    h("div", { class: "actions" }, submit),
  );
  const modal = openModal(`编辑用户 · ${user.name}`, form);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    // The browser checks first (custom validity); this catches a submit that skipped it.
    const problem = checkHours();
    if (problem) {
      hoursError.textContent = problem;
      hours.focus();
      return;
    }
    const q = quota.value.trim();
    const body = {
      name: name.value.trim(),
      role: role.value,
      quota_bytes: q === "" || Number(q) <= 0 ? null : Math.round(Number(q) * MB),
      default_ttl_hours: ttl.value === "inherit" ? null : ttl.value === "forever" ? 0 : Number(hours.value),
      disabled: disabled.checked,
    };
    void busy(
      submit,
      async () => {
        await api<User>("PUT", `/api/admin/users/${encodeURIComponent(user.id)}`, body);
        modal.close();
        toast(`已保存 ${body.name}`);
        saved();
      },
      (msg) => (error.textContent = msg),
    );
  });
}

function usage(u: User): HTMLElement {
  if (u.quota_bytes === null) return h("span", null, `${fmtBytes(u.used_bytes)} / 不限`);
  const p = percent(u.used_bytes, u.quota_bytes);
  return h(
    "span",
    { class: "usage" },
    `${fmtBytes(u.used_bytes)} / ${fmtBytes(u.quota_bytes)}`,
    h("progress", { max: 100, value: p, "aria-label": `已用 ${p}%` }),
  );
}

export function usersView(ctx: ViewContext): HTMLElement {
  const tbody = h("tbody");

  const row = (u: User): HTMLElement => {
    const path = `/api/admin/users/${encodeURIComponent(u.id)}`;
    const actions = h("td", { class: "row-actions" });
    const act = (label: string, run: () => Promise<void>, cls = "small") => {
      const b = h("button", { type: "button", class: cls }, label);
      b.addEventListener("click", () => void busy(b, run));
      actions.append(b);
    };
    act("编辑", async () => editUser(ctx, u, () => void load()));
    actions.append(h("a", { class: "button small", href: `#images?user=${encodeURIComponent(u.id)}` }, "查看图片"));
    actions.append(h("a", { class: "button small", href: `#tokens?user=${encodeURIComponent(u.id)}` }, "查看令牌"));
    act("重置密码", async () => resetPassword(u));
    if (u.id !== ctx.me.user.id) {
      act(u.disabled ? "启用" : "停用", async () => {
        const { name, role, quota_bytes, default_ttl_hours } = u;
        await api<User>("PUT", path, { name, role, quota_bytes, default_ttl_hours, disabled: !u.disabled });
        toast(u.disabled ? "已启用" : "已停用");
        await load();
      });
      act(
        "删除",
        async () => {
          if (!confirm(`删除用户“${u.name}”？仍拥有图片的用户无法删除。`)) return;
          await api("DELETE", path);
          toast("已删除");
          await load();
        },
        "small danger",
      );
    }
    return h(
      "tr",
      { dataset: { name: u.name } },
      h("td", null, u.name, u.id === ctx.me.user.id ? h("span", { class: "muted" }, "（你）") : null),
      h("td", null, u.role === "admin" ? "管理员" : "用户"),
      h("td", null, u.disabled ? badge("已停用", "bad") : badge("正常", "ok")),
      h("td", null, u.image_count),
      h("td", null, usage(u)),
      h("td", null, u.default_ttl_hours === null ? "跟随全局" : u.default_ttl_hours === 0 ? "永久" : `${u.default_ttl_hours} 小时`),
      h("td", null, fmtTime(u.created_at)),
      actions,
    );
  };

  async function load(): Promise<void> {
    try {
      const data = await api<Page<User>>("GET", "/api/admin/users");
      replace(tbody, ...data.items.map(row));
    } catch (err) {
      replace(tbody, h("tr", null, h("td", { colSpan: 8, class: "error" }, `加载失败：${errorText(err)}`)));
    }
  }

  const name = h("input", { name: "new_user_name", "aria-label": "用户名", placeholder: "用户名", required: true, maxLength: 64, autocomplete: "off" });
  const password = h("input", {
    name: "new_user_password",
    "aria-label": "初始密码",
    type: "password",
    placeholder: "初始密码（至少 8 位）",
    minLength: 8,
    required: true,
    autocomplete: "new-password",
  });
  const role = h(
    "select",
    { name: "new_user_role", "aria-label": "角色" },
    h("option", { value: "user" }, "普通用户"),
    h("option", { value: "admin" }, "管理员"),
  );
  const quota = h("input", {
    name: "new_user_quota",
    "aria-label": "配额（MB）",
    type: "number",
    min: 0,
    step: 1,
    placeholder: "配额 MB（空为不限）",
    class: "mid",
  });
  const ttl = h("input", {
    name: "new_user_ttl",
    "aria-label": "默认有效期（小时）",
    type: "number",
    min: 0,
    max: 876000,
    step: 1,
    placeholder: "默认有效期（小时）",
    class: "mid",
  });
  const submit = h("button", { type: "submit", class: "primary" }, "创建用户");
  const form = h("form", { class: "inline wrap", id: "user-form" }, name, password, role, quota, ttl, submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body: Record<string, unknown> = { name: name.value.trim(), password: password.value, role: role.value };
    if (quota.value.trim() !== "" && Number(quota.value) > 0) body.quota_bytes = Math.round(Number(quota.value) * MB);
    if (ttl.value.trim() !== "") body.default_ttl_hours = Number(ttl.value);
    void busy(submit, async () => {
      const created = await api<User>("POST", "/api/admin/users", body);
      form.reset();
      toast(`已创建用户 ${created.name}`);
      await load();
    });
  });

  void load();
  return h(
    "section",
    { class: "view" },
    h("h1", null, "用户"),
    form,
    h(
      "table",
      { class: "table", id: "user-table" },
      h("thead", null, h("tr", null, ...["用户名", "角色", "状态", "图片", "用量 / 配额", "默认有效期", "创建时间", ""].map((t) => h("th", null, t)))),
      tbody,
    ),
  );
}
