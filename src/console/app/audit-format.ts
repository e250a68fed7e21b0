// How an audit entry reads in the console: the server's own jobs as 系统 (the stored actor name stays
// "system"), the object with a name where the entry or the user lists know one, and the details as
// "名称: 值" lines instead of the JSON the server stores.
import { api, query } from "./api";
import { h } from "./dom";
import { fieldLabel } from "./labels";
import { SETTING_GROUPS } from "./settings-fields";
import type { AuditEntry, Page } from "./types";

/** The actor id of the server's own jobs (src/ops/audit.ts SYSTEM_ACTOR); the audit API filters by it too. */
export const SYSTEM_ACTOR_ID = "system";

/** Labels of the detail keys the server records (grep `audit(` in src/); any other key shows as itself. */
const KEY_LABELS: Record<string, string> = {
  name: "名称",
  role: "角色",
  disabled: "停用",
  keep_blob_id: "保留的文件",
  removed_blob_id: "移除的文件",
  images: "图片数",
  blob_a: "文件 A",
  blob_b: "文件 B",
  pattern: "规则",
  channels: "渠道",
  owner: "所有者",
  ended: "结束的会话数",
  client: "客户端",
  via: "途径",
  expires_in_hours: "有效期（小时）",
  cleanup_exempt: "清理豁免",
  ttl_hours: "有效期（小时）",
  priority: "优先级",
  encrypted: "加密",
  allow_direct_link: "直链",
  template: "模板",
  driver: "驱动",
  config: "配置",
  inputs: "模板参数",
  config_changed: "配置已改动",
  purge: "清空渠道数据",
  token_id: "令牌",
  key: "对象键",
};

const SETTING_LABELS = new Map(SETTING_GROUPS.flatMap((g) => g.fields.map((f) => [f.key as string, f.label] as const)));

function keyLabel(action: string, key: string, nested: boolean): string {
  if (action === "config.update" && !nested) return SETTING_LABELS.get(key) ?? key;
  return nested ? fieldLabel(key)[0] : (KEY_LABELS[key] ?? key);
}

function valueText(value: unknown): string {
  if (value === true) return "是";
  if (value === false) return "否";
  if (value === null || value === "") return "—";
  // Credential settings are recorded as markers only (src/config/views.ts configAuditDetail).
  if (value === "(set)") return "已设置";
  if (value === "(empty)") return "已清空";
  if (Array.isArray(value)) return value.length ? value.map(valueText).join("、") : "—";
  return String(value);
}

/**
 * `key: value` lines of a detail object; nested objects (a channel's config) one line per key under
 * their parent's label. A token's owner is a user id: shown by name when known.
 */
function lines(action: string, detail: Record<string, unknown>, users: Map<string, string>, prefix = ""): [string, string][] {
  return Object.entries(detail).flatMap(([k, v]): [string, string][] => {
    const label = prefix ? `${prefix} · ${keyLabel(action, k, true)}` : keyLabel(action, k, false);
    if (v && typeof v === "object" && !Array.isArray(v)) return lines(action, v as Record<string, unknown>, users, label);
    if (k === "owner" && !prefix && typeof v === "string" && users.has(v)) return [[label, `${users.get(v)}（${v}）`]];
    return [[label, valueText(v)]];
  });
}

function parsed(detail: string): unknown {
  if (!detail.startsWith("{")) return undefined;
  try {
    return JSON.parse(detail);
  } catch {
    return undefined;
  }
}

/** The details cell: one "名称: 值" line per recorded key; text that is no JSON object stays as it is. */
export function detailCell(e: AuditEntry, users: Map<string, string>): HTMLElement {
  const obj = parsed(e.detail);
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return h("td", { class: "wrap" }, e.detail || "—");
  const rows = lines(e.action, obj as Record<string, unknown>, users);
  if (!rows.length) return h("td", null, "—");
  return h("td", { class: "wrap" }, h("ul", { class: "audit-detail" }, ...rows.map(([k, v]) => h("li", null, h("span", { class: "muted" }, `${k}: `), v))));
}

export function actorName(e: AuditEntry): string {
  return e.actor === SYSTEM_ACTOR_ID ? "系统" : e.actor_name || e.actor || "系统";
}

/**
 * The object cell: the name the entry records (a user, token or channel) or a known user's name, with
 * the id beside it; an id alone when nothing names it (an image, a snapshot).
 */
export function targetCell(e: AuditEntry, users: Map<string, string>): HTMLElement {
  if (!e.target) return h("td", null, "—");
  const obj = parsed(e.detail) as Record<string, unknown> | undefined;
  const recorded = obj && typeof obj === "object" ? (typeof obj.name === "string" ? obj.name : typeof obj.pattern === "string" ? obj.pattern : "") : "";
  const known = e.action.startsWith("user.") || e.action.startsWith("auth.") ? users.get(e.target) : undefined;
  const name = recorded || known;
  if (!name) return h("td", { class: "wrap" }, h("code", null, e.target));
  return h("td", { class: "wrap" }, name, " ", h("code", { class: "muted" }, e.target));
}

/** Reads of the user.delete history for the actor filter, at most (100 entries each). */
const DELETED_PAGES = 5;

/**
 * Users deleted since the oldest kept audit entry, id → name, from their user.delete entries (the
 * users list no longer has them, but their entries still name them as actor and can be filtered).
 */
export async function deletedUsers(current: Set<string>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let page = 1; page <= DELETED_PAGES; page++) {
    const data = await api<Page<AuditEntry>>("GET", `/api/admin/audit${query({ action: "user.delete", page, page_size: 100 })}`);
    for (const e of data.items) {
      const name = (parsed(e.detail) as { name?: unknown } | undefined)?.name;
      if (!current.has(e.target) && !out.has(e.target)) out.set(e.target, typeof name === "string" ? name : e.target);
    }
    if (data.items.length < 100 || page * 100 >= data.total) break;
  }
  return out;
}
