// "登录设备": the signed-in user's sessions (GET /api/admin/me/sessions) with where each logged in
// from, and ending one of them, or every other one, without a password change.
import { api } from "./api";
import type { OwnSession } from "./api-types";
import { badge, busy, errorText, fmtTime, h, openModal, replace, toast } from "./dom";
import { dataTable, messageRow } from "./ui";

const COLUMNS = ["设备", "地址", "登录时间", "到期", ""];

const BROWSERS: [RegExp, string][] = [
  [/Edg(?:e|A|iOS)?\//, "Edge"],
  [/OPR\/|Opera/, "Opera"],
  [/Firefox\/|FxiOS\//, "Firefox"],
  [/Chrome\/|CriOS\//, "Chrome"],
  [/Safari\//, "Safari"],
  [/curl\//, "curl"],
];
const SYSTEMS: [RegExp, string][] = [
  [/Android/, "Android"],
  [/iPhone|iPad|iPod/, "iOS"],
  [/Windows/, "Windows"],
  [/Mac OS X|Macintosh/, "macOS"],
  [/CrOS/, "ChromeOS"],
  [/Linux/, "Linux"],
];

/** The name of the first pattern (in order: Edge and Opera also say Chrome) that the text matches. */
const firstMatch = (list: [RegExp, string][], ua: string) => list.find(([pattern]) => pattern.test(ua))?.[1];

/** A short name for a User-Agent ("Chrome · Windows"); the full text stays in the cell's title. */
export function describeUserAgent(ua: string): string {
  if (!ua) return "未知（升级前的登录）";
  const browser = firstMatch(BROWSERS, ua) ?? "其他客户端";
  const os = firstMatch(SYSTEMS, ua);
  return os ? `${browser} · ${os}` : browser;
}

/** Opens the dialog; `onCurrentEnded` runs when the user ends the session they are using. */
export function openSessionsDialog(onCurrentEnded: () => void): void {
  const { table, tbody } = dataTable("sessions-table", COLUMNS);
  const endOthers = h("button", { type: "button", id: "end-other-sessions" }, "退出其他所有设备");
  const note = h("p", { class: "muted" }, "结束一个会话后，该设备需要重新登录。修改密码会结束全部会话。");
  const modal = openModal("登录设备", note, h("div", { class: "table-wrap" }, table), h("div", { class: "actions" }, endOthers));
  modal.dialog.classList.add("wide");

  const end = async (session: OwnSession) => {
    await api("DELETE", `/api/admin/me/sessions/${encodeURIComponent(session.id)}`);
    if (session.current) {
      modal.close();
      onCurrentEnded();
      return;
    }
    toast("该设备已退出登录");
    await load();
  };

  const row = (s: OwnSession) => {
    const button = h("button", { type: "button", class: "link" }, s.current ? "退出登录" : "退出该设备");
    button.onclick = () => {
      if (!s.current && !confirm(`让“${describeUserAgent(s.user_agent)}”（${s.client || "地址未知"}）退出登录？`)) return;
      void busy(button, () => end(s));
    };
    return h(
      "tr",
      { dataset: { session: s.id } },
      h("td", { title: s.user_agent }, describeUserAgent(s.user_agent), s.current ? h("span", null, " ", badge("当前", "ok")) : null),
      h("td", null, s.client || "—"),
      h("td", null, fmtTime(s.created_at)),
      h("td", null, fmtTime(s.expires_at)),
      h("td", { class: "row-actions" }, button),
    );
  };

  async function load(): Promise<void> {
    replace(tbody, messageRow(COLUMNS.length, "加载中…", "loading"));
    try {
      const { items } = await api<{ items: OwnSession[] }>("GET", "/api/admin/me/sessions");
      replace(tbody, ...items.map(row));
      endOthers.disabled = items.every((s) => s.current);
    } catch (err) {
      replace(tbody, messageRow(COLUMNS.length, errorText(err), "error"));
    }
  }

  endOthers.onclick = () => {
    if (!confirm("让除本设备以外的所有设备退出登录？")) return;
    void busy(endOthers, async () => {
      const { ended } = await api<{ ended: number }>("POST", "/api/admin/me/sessions/end-others");
      toast(ended > 0 ? `已让 ${ended} 个其他会话退出登录` : "没有其他会话");
    }).then(load); // after busy() gave the button back, so the list decides whether it stays usable
  };
  void load();
}
