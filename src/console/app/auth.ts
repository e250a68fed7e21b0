// Login, the forced factory-password change, and the voluntary password change.
import { api } from "./api";
import { busy, h, openModal, replace, toast } from "./dom";
import type { Principal } from "./types";

/** A centred card with a title, an optional notice and a form. */
function card(title: string, notice: string | undefined, form: HTMLFormElement): HTMLElement {
  return h(
    "main",
    { class: "auth" },
    h(
      "section",
      { class: "card auth-card" },
      h("div", { class: "brand big" }, "Kura 图床"),
      h("h1", null, title),
      notice ? h("p", { class: "notice" }, notice) : null,
      form,
    ),
  );
}

function field(label: string, input: HTMLInputElement): HTMLElement {
  return h("label", { class: "field" }, h("span", null, label), input);
}

/**
 * The name + password form. `name` pre-fills the user name (after a password change, or a
 * re-login over the page) and puts the cursor in the password field.
 */
export function loginForm(onLoggedIn: (p: Principal) => void, opts: { id: string; name?: string }): HTMLFormElement {
  const name = h("input", { name: "name", autocomplete: "username", required: true, value: opts.name ?? "" });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const error = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "登录");
  const form = h("form", { id: opts.id }, field("用户名", name), field("密码", password), error, submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    error.textContent = "";
    void busy(
      submit,
      async () => {
        const body = { name: name.value.trim(), password: password.value };
        // 403 here is a disabled account, not a stale session: no session re-check.
        onLoggedIn(await api<Principal>("POST", "/api/admin/auth/login", body, { quiet401: true, quiet403: true }));
      },
      (msg) => (error.textContent = msg),
    );
  });
  // After insertion into the page (focus() on a detached element does nothing).
  queueMicrotask(() => (opts.name ? password : name).focus());
  return form;
}

export function showLogin(root: HTMLElement, onLoggedIn: (p: Principal) => void, notice?: string, userName?: string): void {
  replace(root, card("登录管理控制台", notice, loginForm(onLoggedIn, { id: "login-form", name: userName })));
}

/** Old / new / repeat form; resolves after PUT /api/admin/me/password succeeded (all sessions are then gone). */
function passwordForm(onChanged: () => void, id: string, userName: string): HTMLFormElement {
  // Password managers tie a changed password to an account through a user-name field in the form.
  const user = h("input", { name: "username", autocomplete: "username", value: userName, readOnly: true, hidden: true });
  const oldPw = h("input", { name: "old_password", type: "password", autocomplete: "current-password", required: true });
  const newPw = h("input", { name: "new_password", type: "password", autocomplete: "new-password", minLength: 8, required: true });
  const again = h("input", { name: "new_password_again", type: "password", autocomplete: "new-password", minLength: 8, required: true });
  const error = h("p", { class: "error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "修改密码");
  const form = h("form", { id }, user, field("原密码", oldPw), field("新密码（至少 8 位）", newPw), field("再次输入新密码", again), error, submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    error.textContent = "";
    if (newPw.value !== again.value) {
      error.textContent = "两次输入的新密码不一致";
      return;
    }
    void busy(
      submit,
      async () => {
        await api("PUT", "/api/admin/me/password", { old_password: oldPw.value, new_password: newPw.value }, { quiet401: true });
        onChanged();
      },
      (msg) => (error.textContent = msg),
    );
  });
  return form;
}

/** While must_change_password is set, every other admin call answers 403: this is the only screen. */
export function showForcedPasswordChange(root: HTMLElement, me: Principal, onChanged: () => void, onLogout: () => void): void {
  const form = passwordForm(onChanged, "force-password-form", me.user.name);
  const logout = h("button", { type: "button", class: "link", onclick: onLogout }, "退出登录");
  replace(root, card(`你好，${me.user.name}`, "当前使用的是出厂默认密码。修改密码后才能使用控制台，修改成功后需要重新登录。", form));
  root.querySelector(".auth-card")?.append(logout);
}

export function openPasswordDialog(userName: string, onChanged: () => void): void {
  const modal = openModal(
    "修改密码",
    h("p", { class: "muted" }, "修改后该账号的所有会话都会失效，需要重新登录。"),
    passwordForm(
      () => {
        modal.close();
        toast("密码已修改，请重新登录");
        onChanged();
      },
      "password-form",
      userName,
    ),
  );
}
