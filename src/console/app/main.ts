// Entry point of the console: session state machine (login → forced password change → shell)
// and the tabbed shell. Pages are addressed by location.hash (#dashboard, #images, …), so
// reloads and shared links keep the place.
import { api, ApiError, setCsrf } from "./api";
import { openPasswordDialog, showForcedPasswordChange, showLogin } from "./auth";
import { auditView } from "./audit";
import { backupsView } from "./backups";
import { channelsView } from "./channels";
import { dashboardView } from "./dashboard";
import { errorText, h, replace, toast } from "./dom";
import { imagesView } from "./images";
import { confirmLeave, setLeaveGuard } from "./leave-guard";
import { referersView } from "./referers";
import { labelTablesIn } from "./responsive-tables";
import { reviewView } from "./review";
import { openSessionsDialog } from "./sessions";
import { syncSession } from "./session-sync";
import { settingsView } from "./settings";
import { tokensView } from "./tokens";
import type { Alert, ConfigSlice, Page, Principal, ViewContext } from "./types";
import { onPageQuery } from "./ui";
import { uploadView } from "./upload";
import { usersView } from "./users";

interface Tab {
  id: string;
  label: string;
  adminOnly: boolean;
  render(ctx: ViewContext): HTMLElement;
  /** Rendered once per session and kept, so its state (upload results) survives tab switches. */
  keep?: boolean;
}

const TABS: Tab[] = [
  { id: "dashboard", label: "概览", adminOnly: false, render: dashboardView },
  { id: "upload", label: "上传", adminOnly: false, render: uploadView, keep: true },
  { id: "images", label: "图片", adminOnly: false, render: imagesView },
  { id: "tokens", label: "上传令牌", adminOnly: false, render: tokensView },
  { id: "users", label: "用户", adminOnly: true, render: usersView },
  { id: "channels", label: "存储渠道", adminOnly: true, render: channelsView },
  { id: "review", label: "审核", adminOnly: true, render: reviewView },
  { id: "backups", label: "备份", adminOnly: true, render: backupsView },
  { id: "audit", label: "审计与告警", adminOnly: true, render: auditView },
  { id: "settings", label: "设置", adminOnly: true, render: settingsView },
  { id: "referers", label: "防盗链", adminOnly: true, render: referersView },
];

const root = document.getElementById("app")!;
labelTablesIn(document.body);
/** Whom the open console was built for; null on the login and forced-password screens. */
let shown: Principal | null = null;

function login(notice?: string, userName?: string): void {
  shown = null;
  window.onhashchange = null;
  setCsrf("");
  setLeaveGuard(null);
  showLogin(root, enter, notice, userName);
}

async function logout(): Promise<void> {
  try {
    await api("POST", "/api/admin/auth/logout", undefined, { quiet401: true });
  } catch {
    // Logging out is idempotent; the login screen is right either way.
  }
  login("已退出登录");
}

function enter(me: Principal): void {
  shown = null;
  window.onhashchange = null;
  setCsrf(me.csrf_token);
  if (me.user.must_change_password) {
    showForcedPasswordChange(
      root,
      me,
      () => login("密码已修改，请使用新密码重新登录", me.user.name),
      () => void logout(),
    );
    return;
  }
  void openShell(me);
}

/** The top-bar badge: open alerts, on every page, linking to the alert history. */
function alertBadge(isAdmin: boolean): { el: HTMLElement; refresh(): void } {
  const el = h("a", { href: "#audit", id: "alert-badge", class: "alert-badge", hidden: true, title: "未解除的告警" });
  const refresh = () => {
    if (!isAdmin) return;
    api<Page<Alert>>("GET", "/api/admin/alerts").then(
      (data) => {
        el.hidden = data.total === 0;
        el.textContent = `告警 ${data.total}`;
      },
      () => undefined, // the badge is a hint; a failed poll must not disturb the page
    );
  };
  return { el, refresh };
}

async function openShell(me: Principal): Promise<void> {
  let config: ConfigSlice;
  try {
    config = await api<ConfigSlice>("GET", "/api/admin/config");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    replace(root, h("p", { class: "error page-error" }, `加载配置失败：${errorText(err)}`));
    return;
  }
  const isAdmin = me.user.role === "admin";
  const badge = alertBadge(isAdmin);
  const ctx: ViewContext = { me, config, origin: config.base_url || location.origin, refreshAlerts: badge.refresh };
  const tabs = TABS.filter((t) => !t.adminOnly || isAdmin);
  const kept = new Map<string, HTMLElement>();
  const content = h("main", { class: "content", id: "content" });
  const nav = h("nav", { class: "tabs", id: "tabs", "aria-label": "页面" });
  const menu = h("button", { type: "button", class: "menu-toggle", "aria-expanded": "false", "aria-controls": "tabs" }, "菜单");
  const links = new Map<string, HTMLAnchorElement>();
  for (const t of tabs) {
    const a = h("a", { href: `#${t.id}`, dataset: { tab: t.id } }, t.label);
    links.set(t.id, a);
    nav.append(a);
  }
  const setMenu = (open: boolean) => {
    nav.classList.toggle("open", open);
    menu.setAttribute("aria-expanded", String(open));
  };
  menu.addEventListener("click", () => setMenu(!nav.classList.contains("open")));

  // The hash is `#<page>` or `#<page>?<filters>` (e.g. #images?user=… from the users page).
  let current = "";
  const show = () => {
    const hash = location.hash.slice(1);
    const tab = tabs.find((t) => t.id === hash.split("?")[0]) ?? tabs[0]!;
    const wanted = tab.id === hash.split("?")[0] ? hash : tab.id;
    if (wanted === current) return;
    if (current && !confirmLeave()) {
      history.replaceState(null, "", `#${current}`);
      return;
    }
    setLeaveGuard(null);
    current = wanted;
    for (const [id, a] of links) {
      a.classList.toggle("active", id === tab.id);
      if (id === tab.id) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    menu.textContent = `菜单 · ${tab.label}`;
    setMenu(false);
    let view = tab.keep ? kept.get(tab.id) : undefined;
    if (!view) {
      view = tab.render(ctx);
      if (tab.keep) kept.set(tab.id, view);
    }
    replace(content, view);
    badge.refresh();
  };

  const header = h(
    "header",
    { class: "topbar" },
    h("div", { class: "brand" }, "Kura 图床"),
    menu,
    nav,
    h(
      "div",
      { class: "who" },
      badge.el,
      h("span", { id: "me-name" }, me.user.name),
      h("span", { class: "badge muted" }, isAdmin ? "管理员" : "用户"),
      h(
        "button",
        { type: "button", class: "link", onclick: () => openPasswordDialog(me.user.name, () => login("密码已修改，请使用新密码重新登录", me.user.name)) },
        "修改密码",
      ),
      h("button", { type: "button", class: "link", id: "sessions", onclick: () => openSessionsDialog(() => login("已退出登录")) }, "登录设备"),
      h("button", { type: "button", class: "link", id: "logout", onclick: () => confirmLeave() && void logout() }, "退出"),
    ),
  );
  const footer = h(
    "footer",
    { class: "foot" },
    `Kura ${config.build.version}（${config.build.commit}）· `,
    h("a", { href: "/api/docs", target: "_blank", rel: "noopener" }, "API 文档"),
  );
  replace(root, h("div", { class: "shell" }, header, content, footer));
  shown = me;
  // A page that wrote its filters into the link (setPageQuery) is still the page shown for that
  // link, and its tab link carries them, so leaving and coming back keeps them.
  onPageQuery((hash) => {
    const id = hash.split("?")[0]!;
    if (current.split("?")[0] === id) current = hash;
    const a = links.get(id);
    if (a) a.href = `#${hash}`;
  });
  window.onhashchange = show;
  show();
}

syncSession({
  shown: () => shown,
  reenter: (me, notice) => {
    enter(me);
    toast(notice);
  },
  loggedOut: (notice) => login(notice),
});

api<Principal>("GET", "/api/admin/me", undefined, { quiet401: true }).then(enter, () => login());
