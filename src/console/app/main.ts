// Entry point of the console: session state machine (login → forced password change → shell)
// and the tabbed shell. Tabs are addressed by location.hash so reloads keep the place.
import { api, ApiError, onUnauthorized, setCsrf } from "./api";
import { openPasswordDialog, showForcedPasswordChange, showLogin } from "./auth";
import { errorText, h, replace } from "./dom";
import { channelsView } from "./channels";
import { imagesView } from "./images";
import { referersView } from "./referers";
import { settingsView } from "./settings";
import { tokensView } from "./tokens";
import type { ConfigSlice, Principal, ViewContext } from "./types";
import { uploadView } from "./upload";
import { usersView } from "./users";

interface Tab {
  id: string;
  label: string;
  adminOnly: boolean;
  render(ctx: ViewContext): HTMLElement;
}

const TABS: Tab[] = [
  { id: "upload", label: "上传", adminOnly: false, render: uploadView },
  { id: "images", label: "图片", adminOnly: false, render: imagesView },
  { id: "tokens", label: "上传令牌", adminOnly: false, render: tokensView },
  { id: "users", label: "用户", adminOnly: true, render: usersView },
  { id: "channels", label: "存储渠道", adminOnly: true, render: channelsView },
  { id: "settings", label: "设置", adminOnly: true, render: settingsView },
  { id: "referers", label: "防盗链", adminOnly: true, render: referersView },
];

const root = document.getElementById("app")!;

function login(notice?: string): void {
  setCsrf("");
  showLogin(root, enter, notice);
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
  setCsrf(me.csrf_token);
  if (me.user.must_change_password) {
    showForcedPasswordChange(root, me, () => login("密码已修改，请使用新密码重新登录"), () => void logout());
    return;
  }
  void openShell(me);
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
  const ctx: ViewContext = { me, config, origin: config.base_url || location.origin };
  const tabs = TABS.filter((t) => !t.adminOnly || me.user.role === "admin");
  const content = h("main", { class: "content" });
  const nav = h("nav", { class: "tabs" });
  const links = new Map<string, HTMLAnchorElement>();
  for (const t of tabs) {
    const a = h("a", { href: `#${t.id}`, dataset: { tab: t.id } }, t.label);
    links.set(t.id, a);
    nav.append(a);
  }

  const show = () => {
    const wanted = location.hash.slice(1);
    const tab = tabs.find((t) => t.id === wanted) ?? tabs[0]!;
    for (const [id, a] of links) a.classList.toggle("active", id === tab.id);
    replace(content, tab.render(ctx));
  };

  const header = h(
    "header",
    { class: "topbar" },
    h("div", { class: "brand" }, "Kura 图床"),
    nav,
    h(
      "div",
      { class: "who" },
      h("span", { id: "me-name" }, me.user.name),
      h("span", { class: "badge muted" }, me.user.role === "admin" ? "管理员" : "用户"),
      h("button", { type: "button", class: "link", onclick: () => openPasswordDialog(() => login("密码已修改，请使用新密码重新登录")) }, "修改密码"),
      h("button", { type: "button", class: "link", id: "logout", onclick: () => void logout() }, "退出"),
    ),
  );
  const footer = h(
    "footer",
    { class: "foot" },
    `Kura ${config.build.version}（${config.build.commit}）· `,
    h("a", { href: "/api/docs", target: "_blank", rel: "noopener" }, "API 文档"),
  );
  replace(root, h("div", { class: "shell" }, header, content, footer));
  window.onhashchange = show;
  show();
}

onUnauthorized(() => {
  window.onhashchange = null;
  login("会话已过期，请重新登录");
});

api<Principal>("GET", "/api/admin/me", undefined, { quiet401: true }).then(enter, () => login());
