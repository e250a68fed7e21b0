// #audit (admins): the audit log with filters (actor — the system and deleted users too —, action,
// target, time range; kept in the page's link with the page number) and the alert history, open and
// resolved. How an entry reads is in audit-format.ts.
import { api, query } from "./api";
import { actorName, deletedUsers, detailCell, SYSTEM_ACTOR_ID, targetCell } from "./audit-format";
import { badge, errorText, fmtTime, h, replace } from "./dom";
import { ALERT_KINDS } from "./labels";
import type { Alert, AuditEntry, Page, User, ViewContext } from "./types";
import { dataTable, hashParams, localInputToUtc, messageRow, pageParam, renderPager, setPageQuery } from "./ui";

const PAGE_SIZE = 50;

/** Actions the server records, for the filter's suggestions (free text is accepted too). */
const KNOWN_ACTIONS = [
  "auth.login",
  "auth.session_end",
  "user.create",
  "user.update",
  "user.delete",
  "user.password_change",
  "user.password_reset",
  "config.update",
  "token.create",
  "token.revoke",
  "token.rotate",
  "token.delete",
  "token.s3_credential",
  "image.delete",
  "image.update",
  "image.expire",
  "channel.create",
  "channel.update",
  "channel.delete",
  "channel.export",
  "dedup.merge",
  "dedup.dismiss",
  "metadata.export",
  "backup.create",
  "backup.download",
  "backup.restore",
  "referer.create",
  "referer.delete",
];

function auditSection(users: User[], deleted: Map<string, string>): HTMLElement {
  const wanted = hashParams();
  let page = pageParam(wanted);
  /** Names of every user the log may mention, current and deleted, for the object column. */
  const names = new Map([...deleted, ...users.map((u) => [u.id, u.name] as const)]);
  const { table, tbody } = dataTable("audit-table", ["时间", "操作者", "动作", "对象", "详情"]);
  const pager = h("div", { class: "pager" });
  const count = h("span", { class: "muted", id: "audit-count" });
  const actor = h(
    "select",
    { name: "actor" },
    h("option", { value: "" }, "全部"),
    h("option", { value: SYSTEM_ACTOR_ID }, "系统"),
    ...users.map((u) => h("option", { value: u.id }, u.name)),
    ...[...deleted].map(([id, name]) => h("option", { value: id }, `${name}（已删除）`)),
  );
  const action = h("input", { name: "action", list: "audit-actions", placeholder: "如 config.update", autocomplete: "off" });
  const target = h("input", { name: "target", placeholder: "精确匹配", autocomplete: "off" });
  const since = h("input", { type: "datetime-local", name: "since" });
  const until = h("input", { type: "datetime-local", name: "until" });
  // Filters from the link (a reload, the tab link, a shared address); an actor no list knows still filters.
  const linked = wanted.get("actor") ?? "";
  if (linked && ![...actor.options].some((o) => o.value === linked)) actor.append(h("option", { value: linked }, linked));
  actor.value = linked;
  action.value = wanted.get("action") ?? "";
  target.value = wanted.get("target") ?? "";
  since.value = wanted.get("since") ?? "";
  until.value = wanted.get("until") ?? "";
  const apply = h("button", { type: "submit", class: "primary" }, "筛选");
  const reset = h("button", { type: "reset" }, "清除");
  const error = h("p", { class: "error", role: "alert" });
  const f = (label: string, el: HTMLElement) => h("label", { class: "field" }, h("span", null, label), el);
  const form = h(
    "form",
    { class: "filters", id: "audit-filters" },
    f("操作者", actor),
    f("动作", action),
    f("对象", target),
    f("起（含）", since),
    f("止（不含）", until),
    h("div", { class: "filter-actions" }, apply, reset),
    h("datalist", { id: "audit-actions" }, ...KNOWN_ACTIONS.map((a) => h("option", { value: a }))),
  );

  const show = (p: number) => {
    page = p;
    void load();
  };
  const load = async () => {
    error.textContent = "";
    try {
      const q = query({
        page,
        page_size: PAGE_SIZE,
        actor: actor.value,
        action: action.value.trim(),
        target: target.value.trim(),
        since: localInputToUtc(since.value),
        until: localInputToUtc(until.value),
      });
      const data = await api<Page<AuditEntry>>("GET", `/api/admin/audit${q}`);
      const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      // A page number past the end (from an old link) shows the last page instead of nothing.
      if (page > pages) return show(pages);
      setPageQuery("audit", {
        actor: actor.value,
        action: action.value.trim(),
        target: target.value.trim(),
        since: since.value,
        until: until.value,
        page: page > 1 ? page : undefined,
      });
      count.textContent = `共 ${data.total} 条`;
      replace(
        tbody,
        ...(data.items.length
          ? data.items.map((e) =>
              h(
                "tr",
                { dataset: { id: String(e.id), action: e.action } },
                h("td", null, fmtTime(e.created_at)),
                h("td", null, actorName(e)),
                h("td", null, h("code", null, e.action)),
                targetCell(e, names),
                detailCell(e, names),
              ),
            )
          : [messageRow(5, "没有符合条件的记录")]),
      );
      renderPager(pager, page, pages, show);
    } catch (err) {
      error.textContent = errorText(err);
    }
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    show(1);
  });
  form.addEventListener("reset", () => setTimeout(() => show(1)));
  void load();
  return h("section", null, h("div", { class: "toolbar" }, h("h2", null, "审计日志"), count), form, error, h("div", { class: "table-wrap" }, table), pager);
}

/** Server pages of the full history read per view of resolved alerts, at most (100 alerts each). */
const RESOLVED_SCAN_PAGES = 20;
const SCAN_PAGE_SIZE = 100;

/**
 * Resolved alerts, which the API cannot filter (it lists open ones, or all): the full history is read
 * newest first, 100 at a time, keeping the resolved ones, until the wanted page is filled. Bounded per
 * view; what was read is kept for the next page.
 */
function resolvedScanner() {
  const found: Alert[] = [];
  let next = 1;
  let done = false;
  return {
    async page(p: number): Promise<{ items: Alert[]; pages: number; done: boolean; read: number }> {
      for (let reads = 0; !done && found.length < p * PAGE_SIZE && reads < RESOLVED_SCAN_PAGES; reads++) {
        const data = await api<Page<Alert>>("GET", `/api/admin/alerts${query({ status: "all", page: next, page_size: SCAN_PAGE_SIZE })}`);
        found.push(...data.items.filter((a) => a.resolved_at));
        done = data.items.length < SCAN_PAGE_SIZE || next * SCAN_PAGE_SIZE >= data.total;
        next++;
      }
      const known = Math.max(1, Math.ceil(found.length / PAGE_SIZE));
      // Not read to the end yet: one more page may hold more.
      return { items: found.slice((p - 1) * PAGE_SIZE, p * PAGE_SIZE), pages: done ? known : Math.max(known, p) + 1, done, read: (next - 1) * SCAN_PAGE_SIZE };
    },
  };
}

function alertSection(): HTMLElement {
  let page = 1;
  let resolved = resolvedScanner();
  const { table, tbody } = dataTable("alert-history", ["状态", "类型", "对象", "说明", "产生", "解除"]);
  const pager = h("div", { class: "pager" });
  const note = h("p", { class: "muted", id: "alert-scan-note" });
  const status = h(
    "select",
    { name: "alert_status", "aria-label": "告警状态" },
    h("option", { value: "all" }, "全部"),
    h("option", { value: "open" }, "未解除"),
    h("option", { value: "resolved" }, "已解除"),
  );
  const show = (p: number) => {
    page = p;
    void load();
  };
  /** The rows of this page and the pager's page count, for the chosen status. */
  const fetchPage = async (): Promise<{ items: Alert[]; pages: number }> => {
    note.textContent = "";
    if (status.value === "open") return { items: (await api<Page<Alert>>("GET", "/api/admin/alerts")).items, pages: 1 };
    if (status.value === "resolved") {
      const r = await resolved.page(page);
      if (!r.done && r.items.length < PAGE_SIZE) note.textContent = `已查看最近 ${r.read} 条告警；更早的已解除告警请翻到下一页继续查找。`;
      return r;
    }
    const data = await api<Page<Alert>>("GET", `/api/admin/alerts${query({ status: "all", page, page_size: PAGE_SIZE })}`);
    return { items: data.items, pages: Math.max(1, Math.ceil(data.total / PAGE_SIZE)) };
  };
  const load = async () => {
    try {
      const { items, pages } = await fetchPage();
      replace(
        tbody,
        ...(items.length
          ? items.map((a) =>
              h(
                "tr",
                { dataset: { id: String(a.id) } },
                h("td", null, a.resolved_at ? badge("已解除", "ok") : badge("未解除", "bad")),
                h("td", null, ALERT_KINDS[a.kind] ?? a.kind),
                h("td", null, a.target || "—"),
                h("td", { class: "wrap" }, a.message),
                h("td", null, fmtTime(a.opened_at)),
                h("td", null, fmtTime(a.resolved_at)),
              ),
            )
          : [messageRow(6, "没有告警")]),
      );
      renderPager(pager, page, pages, show);
    } catch (err) {
      replace(tbody, messageRow(6, `加载失败：${errorText(err)}`, "error"));
    }
  };
  status.addEventListener("change", () => {
    resolved = resolvedScanner();
    show(1);
  });
  void load();
  return h("section", null, h("div", { class: "toolbar" }, h("h2", null, "告警历史"), status), h("div", { class: "table-wrap" }, table), note, pager);
}

export function auditView(_ctx: ViewContext): HTMLElement {
  const body = h("div", { class: "stack" }, h("p", { class: "muted" }, "加载中…"));
  const load = async () => {
    const users = (await api<Page<User>>("GET", "/api/admin/users")).items;
    // Deleted users are a convenience of the filter: the log still shows without them.
    const deleted = await deletedUsers(new Set(users.map((u) => u.id))).catch(() => new Map<string, string>());
    replace(body, alertSection(), auditSection(users, deleted));
  };
  load().catch((err) => replace(body, h("p", { class: "error" }, `加载失败：${errorText(err)}`)));
  return h("section", { class: "view", id: "audit-view" }, h("h1", null, "审计与告警"), body);
}
