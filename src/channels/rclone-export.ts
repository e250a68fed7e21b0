/**
 * Renders a channel as an rclone config file (GET /api/admin/channels/{id}/rclone-config),
 * so an operator can read — and rescue — the channel with stock rclone:
 *
 *   [kura-<id>]         the backend, every parameter as the driver uses it
 *   [kura-<id>-crypt]   encrypted channels only: crypt over `kura-<id>:<path>`
 *
 * The format follows rclone's own config parser (goconfig, rclone 1.60), not a
 * generic INI library: values are taken verbatim after `key =` and trimmed, a
 * value wrapped in `"""…"""` keeps its inside exactly, and a line break can
 * never be represented — so values with one are refused (INI injection).
 */
import type { MasterKey } from "../config/master-key";
import { cryptPasswords } from "./crypt-layer";
import { CHANNEL_LEVEL_KEYS, type DriverOptionSpec } from "./drivers/option-spec";
import { obscure, reveal } from "./rclone/obscure";

export interface ExportableChannel {
  id: number;
  name: string;
  driver: string;
  /** SQLite stores booleans as 0/1. */
  encrypted: number | boolean;
  created_at: string;
}

/**
 * Which values rclone wants obscured is rclone's business, not the UI's: our
 * option specs use `type: "password"` for any masked input field (s3's
 * `secret_access_key` is one), but rclone 1.60 stores s3 secrets in plain text
 * and would sign with the obscured string. So obscuring follows rclone's own
 * `IsPassword` metadata (table below, taken from `rclone config providers`),
 * unless a spec says otherwise with `rcloneObscured`.
 *
 * Some drivers keep those values obscured already in the sealed config, exactly
 * as `rclone config` stores them (webdav/sftp `pass`); they are exported
 * unchanged instead of being obscured twice. A spec may declare this with
 * `storedObscured`, otherwise STORED_OBSCURED decides.
 */
export type ExportOptionSpec = DriverOptionSpec & { rcloneObscured?: boolean; storedObscured?: boolean };

/** Options with `IsPassword` in rclone v1.60.1 (`rclone config providers`), by backend type. */
export const RCLONE_OBSCURED_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  cache: ["plex_password"],
  crypt: ["password", "password2"],
  fichier: ["file_password", "folder_password"],
  ftp: ["pass"],
  koofr: ["password"],
  mailru: ["pass"],
  netstorage: ["secret"],
  opendrive: ["password"],
  pcloud: ["password"],
  seafile: ["pass", "library_key"],
  sftp: ["pass", "key_file_pass"],
  sia: ["api_password"],
  smb: ["pass"],
  webdav: ["pass"],
};

/** Password options Kura's drivers store already obscured (they keep rclone's stored form). */
const STORED_OBSCURED: Readonly<Record<string, readonly string[]>> = {
  webdav: ["pass"],
  sftp: ["pass", "key_file_pass"],
  ftp: ["pass"],
  smb: ["pass"],
};

/** rclone option names: the key is everything before the first '=' or ':' on the line. */
const OPTION_KEY = /^[A-Za-z0-9_]+$/;

export function remoteName(channelId: number): string {
  return `kura-${channelId}`;
}

export function renderRcloneConfig(
  channel: ExportableChannel,
  config: Record<string, string>,
  options: readonly ExportOptionSpec[],
  key: MasterKey,
  now: Date = new Date(),
): string {
  if (!Number.isSafeInteger(channel.id) || channel.id <= 0) throw new Error("渠道 id 无效，无法导出 rclone 配置");
  if (!/^[a-z0-9]+$/.test(channel.driver)) throw new Error("渠道驱动名无效，无法导出 rclone 配置");
  const base = remoteName(channel.id);
  const encrypted = !!channel.encrypted;

  const lines = header(channel, base, config.path ?? "", encrypted, now);
  lines.push(`[${base}]`, `type = ${channel.driver}`);
  for (const [name, value] of backendParameters(channel.driver, config, options)) lines.push(line(name, value));

  if (encrypted) {
    const { password, password2 } = cryptPasswords(key, channel.id, channel.created_at);
    lines.push(
      "",
      `[${base}-crypt]`,
      "type = crypt",
      line("remote", `${base}:${config.path ?? ""}`),
      line("password", obscure(password)),
      line("password2", obscure(password2)),
      "filename_encryption = standard",
      "directory_name_encryption = true",
    );
  }
  return `${lines.join("\n")}\n`;
}

function header(channel: ExportableChannel, base: string, path: string, encrypted: boolean, now: Date): string[] {
  const root = encrypted ? `${base}-crypt:` : shellQuote(`${base}:${path}`);
  const text = [
    "Kura 存储渠道的 rclone 配置 / rclone configuration for a Kura storage channel",
    `渠道 / channel: ${channel.name} (id ${channel.id}, driver ${channel.driver}${encrypted ? ", 已加密 / encrypted" : ""})`,
    `生成时间 / generated: ${now.toISOString().replace(/\.\d{3}Z$/, "Z")} (UTC)`,
    "",
    `警告：本文件包含访问凭据${encrypted ? "和加密密码" : ""}，与主密钥同等敏感，请妥善保管，切勿分享或提交到版本库。`,
    "WARNING: this file contains credentials" +
      (encrypted ? " and the encryption passwords" : "") +
      "; it is as sensitive as the master key. Keep it private; never share or commit it.",
    "",
    "用法 / usage (rclone v1.60+):",
    `  rclone --config kura.conf lsf -R ${root}`,
    `  rclone --config kura.conf copy ${root} ./kura-${channel.id}-backup`,
    ...(encrypted ? [`明文请通过 ${base}-crypt 读取，${base} 中只有密文 / read plaintext through ${base}-crypt; ${base} holds ciphertext only.`] : []),
  ];
  // Names and paths are user input: a line break in them must not end the comment.
  return [...text.map((t) => (t === "" ? "#" : `# ${t.replace(/[\r\n\u2028\u2029]+/g, " ")}`)), ""];
}

/** For the usage hint only: quotes a remote spec the way a POSIX shell needs it. */
function shellQuote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** Every backend parameter in rclone's form: config values, plus the spec defaults the driver applies when a key is unset. */
function backendParameters(driver: string, config: Record<string, string>, options: readonly ExportOptionSpec[]): [string, string][] {
  const specs = new Map(options.map((o) => [o.key, o]));
  const names = [
    ...options.map((o) => o.key),
    ...Object.keys(config)
      .filter((k) => !specs.has(k))
      .sort(),
  ];
  const out: [string, string][] = [];
  for (const name of names) {
    if (CHANNEL_LEVEL_KEYS.has(name)) continue;
    const spec = specs.get(name);
    // Writing the driver's default keeps rclone talking to the backend exactly as Kura does,
    // even where rclone's own default differs.
    const value = config[name] ?? spec?.default;
    if (value === undefined || value === "") continue;
    out.push([name, exportValue(driver, name, value, spec)]);
  }
  return out;
}

function exportValue(driver: string, name: string, value: string, spec: ExportOptionSpec | undefined): string {
  const rcloneObscured = spec?.rcloneObscured ?? RCLONE_OBSCURED_OPTIONS[driver]?.includes(name) ?? false;
  if (rcloneObscured) {
    const storedObscured = spec?.storedObscured ?? STORED_OBSCURED[driver]?.includes(name) ?? false;
    // A stored-obscured value that does not reveal was never obscured; obscuring it is the only form rclone can use.
    if (storedObscured && reveals(value)) return value;
    return obscure(value);
  }
  if (name === "token" && /[\r\n]/.test(value)) return compactJson(name, value);
  // rclone reads sftp `key_pem` with literal "\n" pairs as line breaks.
  if (driver === "sftp" && name === "key_pem") return value.replace(/\r?\n/g, "\\n");
  return value;
}

function reveals(value: string): boolean {
  try {
    reveal(value);
    return true;
  } catch {
    return false;
  }
}

/** OAuth tokens are one-line JSON in rclone's config; a pretty-printed token is re-serialised, not refused. */
function compactJson(name: string, value: string): string {
  try {
    return JSON.stringify(JSON.parse(value));
  } catch {
    throw new Error(`配置项 ${name} 含有换行且不是有效的 JSON，无法写入 rclone 配置`);
  }
}

/** One `key = value` line that rclone parses back to exactly `value`. */
function line(name: string, value: string): string {
  if (!OPTION_KEY.test(name)) throw new Error(`配置项名称无效，无法写入 rclone 配置: ${JSON.stringify(name)}`);
  // goconfig splits lines on \n (a \r would be trimmed) and has no escape for either; NUL is never meaningful.
  if (/[\r\n\0]/.test(value)) throw new Error(`配置项 ${name} 的值含有换行或控制字符，无法写入 rclone 配置`);
  // Values are trimmed and a leading ` or """ opens a quoted value: wrap those in """…""" (the inside is kept verbatim,
  // rclone looks for the *last* closing """ so quotes inside are fine).
  const needsWrap = value !== value.trim() || value.startsWith("`") || value.startsWith('"');
  return `${name} = ${needsWrap ? `"""${value}"""` : value}`;
}
