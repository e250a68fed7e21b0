// The custom (non-template) part of the channel dialog: an rclone backend chosen by name and its
// parameters as `key = value` lines, for a backend no template covers the way it is needed. The
// server accepts this on create and edit alike (driver + config instead of template + inputs).
import { h } from "./dom";
import type { ChannelTemplate } from "./types";

/** The template select's value for "custom": the server reads `custom` (or no template) as driver + config. */
export const CUSTOM = "custom";

export interface CustomFields {
  /** The backend select (fixed when editing: a channel's driver cannot change). */
  driver: HTMLSelectElement;
  config: HTMLTextAreaElement;
  box: HTMLElement[];
}

/** `key = value` lines; a masked value shows as the sentinel and goes back as it is. */
export function readCustomConfig(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^\s*([\w.-]+)\s*=\s*(.*?)\s*$/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/**
 * The backend select and the parameter lines. The backends offered are the ones the templates
 * build on (the server supports exactly those), so the list follows the server without a copy here.
 */
export function customFields(templates: ChannelTemplate[], existing: { driver: string; config: Record<string, string> } | undefined): CustomFields {
  const drivers = [...new Set([...templates.map((t) => t.driver), ...(existing ? [existing.driver] : [])])].sort();
  const driver = h("select", { name: "custom_driver", disabled: !!existing }, ...drivers.map((d) => h("option", { value: d }, d)));
  driver.value = existing?.driver ?? (drivers.includes("local") ? "local" : (drivers[0] ?? ""));
  const config = h("textarea", {
    name: "custom_config",
    rows: 8,
    spellcheck: false,
    placeholder: "path = /srv/kura-images",
    value: Object.entries(existing?.config ?? {})
      .map(([k, v]) => `${k} = ${v}`)
      .join("\n"),
  });
  return {
    driver,
    config,
    box: [
      h(
        "label",
        { class: "field" },
        h("span", null, "存储驱动", h("span", { class: "req", "aria-hidden": "true" }, " *")),
        driver,
        h("small", { class: "muted" }, existing ? "渠道的驱动创建后不能更改" : "rclone 的后端类型名"),
      ),
      h(
        "label",
        { class: "field" },
        h("span", null, "后端参数（每行 参数 = 值；保留 __kura_secret_keep__ 表示不修改已保存的凭据）"),
        config,
        h("small", { class: "muted" }, "参数名与 rclone 配置文件相同，如 local 的 path，s3 的 provider、access_key_id、endpoint"),
      ),
    ],
  };
}

/** Puts a refreshed OAuth token into the `token = …` line (added when missing), so a save sends it. */
export function withToken(text: string, token: string): string {
  const line = `token = ${token}`;
  const existing = /^\s*token\s*=.*$/m;
  // A function, not a string: `$` sequences in the token must stay literal.
  if (existing.test(text)) return text.replace(existing, () => line);
  return text.trim() ? `${text.trimEnd()}\n${line}` : line;
}
