// Keeps an open console in step with the browser's one session cookie. Every tab shares it, so a
// logout, a re-login or another person's login in one tab changes what the other tabs' requests
// are, while their pages still show the old state. After a 403, and whenever the tab comes back
// into view, the console asks /api/admin/me who is logged in now:
// - the same user with a new session: take its CSRF token (api.ts sends the refused write again);
// - another user, or the same user with another role: build the console again for them, and say so;
// - nobody (401 anywhere): a login dialog over the page, so unsaved edits survive a re-login.
import { api, ApiError, currentCsrf, onForbidden, onUnauthorized, type Recheck, setCsrf } from "./api";
import { loginForm } from "./auth";
import { h, type Modal, openModal, toast } from "./dom";
import type { Principal } from "./types";

export interface SessionHooks {
  /** The principal the open console was built for; null while none is open (login screens). */
  shown(): Principal | null;
  /** Builds the console again for `me` (another user or role, or a forced password change). */
  reenter(me: Principal, notice: string): void;
  /** Gives the page up: the full login screen. */
  loggedOut(notice: string): void;
}

const LOST = "会话已结束，请重新登录";

/** Same person with the same rights: the open pages stay valid. */
function sameIdentity(shown: Principal, now: Principal): boolean {
  return shown.user.id === now.user.id && shown.user.role === now.user.role && !now.user.must_change_password;
}

export function syncSession(hooks: SessionHooks): void {
  let relogin: Modal | null = null;

  const recheck = async (): Promise<Recheck> => {
    const shown = hooks.shown();
    if (!shown || relogin) return "unchanged";
    let now: Principal;
    try {
      now = await api<Principal>("GET", "/api/admin/me", undefined, { quiet401: true });
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) sessionLost();
      return "unchanged";
    }
    // Rebuilt or logged out while the answer was on its way.
    if (hooks.shown() !== shown) return hooks.shown() ? "switched" : "unchanged";
    if (!sameIdentity(shown, now)) {
      hooks.reenter(now, `此浏览器已在其他标签页以 ${now.user.name} 登录，页面已切换为该账号`);
      return "switched";
    }
    if (now.csrf_token === currentCsrf()) return "unchanged";
    setCsrf(now.csrf_token);
    return "renewed";
  };

  const sessionLost = (): void => {
    const shown = hooks.shown();
    if (!shown) {
      hooks.loggedOut(LOST);
      return;
    }
    if (relogin) return; // several requests fail at once: one dialog
    const form = loginForm(
      (now) => {
        relogin = null;
        modal.close();
        if (!sameIdentity(shown, now)) {
          hooks.reenter(now, `已以 ${now.user.name} 登录`);
          return;
        }
        setCsrf(now.csrf_token);
        toast("已重新登录，请再提交一次刚才的操作");
      },
      { id: "relogin-form", name: shown.user.name },
    );
    const modal = openModal(
      "重新登录",
      h("p", { class: "notice" }, "会话已结束：在其他标签页退出、密码被修改或会话到期。重新登录后留在当前页面，未保存的修改仍在。"),
      form,
    );
    modal.dialog.id = "relogin-dialog";
    relogin = modal;
    // Closed without logging in: the page cannot be used any more.
    modal.dialog.addEventListener("close", () => {
      if (relogin !== modal) return;
      relogin = null;
      hooks.loggedOut(LOST);
    });
  };

  const back = () => {
    if (document.visibilityState === "visible") void recheck();
  };
  document.addEventListener("visibilitychange", back);
  window.addEventListener("focus", back);
  onForbidden(recheck);
  onUnauthorized(sessionLost);
}
