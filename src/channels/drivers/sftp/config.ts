import { userNameOf } from "../../../shared/passwd";
import { userInfo } from "node:os";
import { revealOption, type DriverOptionSpec } from "../option-spec";
import { ssh2 } from "./ssh2";

/**
 * Keys named exactly like rclone's sftp backend options, plus Kura's `path`.
 * `pass` and `key_file_pass` are stored obscured, as `rclone config` stores them.
 * `key_pem` is kept with real line breaks (the rclone export writes them as
 * literal "\n"); a value pasted from an rclone config ("\n" pairs) works too.
 */
export const sftpDriverOptions: readonly DriverOptionSpec[] = [
  { key: "host", type: "text", required: true, sensitive: true },
  { key: "user", type: "text", required: false, sensitive: true },
  { key: "port", type: "int", required: false, sensitive: false, default: "22" },
  { key: "pass", type: "password", required: false, sensitive: true },
  { key: "key_pem", type: "text", required: false, sensitive: true },
  { key: "key_file", type: "text", required: false, sensitive: false },
  { key: "key_file_pass", type: "password", required: false, sensitive: true },
  { key: "known_hosts_file", type: "text", required: false, sensitive: false },
  // Kura's own (rclone has no such option): the host key pinned on first use. A public fingerprint, so not masked.
  { key: "host_key_sha256", type: "text", required: false, sensitive: false },
  { key: "path", type: "text", required: false, sensitive: false },
];

export interface SftpSettings {
  host: string;
  port: number;
  user: string;
  password?: string;
  /** Inline key (key_pem) — wins over key_file, like rclone. */
  privateKey?: string;
  keyFile?: string;
  passphrase?: string;
  /** Use ssh-agent (SSH_AUTH_SOCK) when no password or key is configured, like rclone. */
  agent?: string;
  /** Null = known_hosts is not consulted. */
  knownHostsFile: string | null;
  /** The pinned host key (`SHA256:<base64>`, as ssh-keygen -l prints it); null = not pinned (yet). */
  hostKeySha256: string | null;
  /**
   * Neither a pin nor known_hosts_file: the first key seen is trusted and reported for recording
   * (OpenSSH's trust on first use). `known_hosts_file = none` opts out, as it means "do not check" in rclone.
   */
  pinOnFirstUse: boolean;
  /** Base directory: absolute, or relative to the login directory; "" = the login directory. */
  root: string;
}

export function resolveSftpSettings(config: Record<string, string>): SftpSettings {
  const host = (config.host ?? "").trim();
  if (host === "") throw new Error("SFTP 存储缺少 host 配置");
  const portText = (config.port ?? "").trim() || "22";
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) throw new Error("SFTP port 无效（应为 1-65535 之间的整数）");
  const user = (config.user ?? "").trim() || currentUser();

  const settings: SftpSettings = {
    host,
    port,
    user,
    knownHostsFile: null,
    hostKeySha256: null,
    pinOnFirstUse: false,
    root: normalizeRoot(config.path ?? ""),
  };
  if (config.pass) settings.password = revealOption("SFTP", "pass", config.pass);
  if (config.key_file_pass) settings.passphrase = revealOption("SFTP", "key_file_pass", config.key_file_pass);
  const pem = config.key_pem ?? "";
  if (pem.trim() !== "") {
    settings.privateKey = pemText(pem);
    checkKey(settings.privateKey, settings.passphrase, "key_pem");
  } else if ((config.key_file ?? "").trim() !== "") {
    settings.keyFile = expandHome(config.key_file.trim());
  }
  if (!settings.password && !settings.privateKey && !settings.keyFile) {
    const agent = process.env.SSH_AUTH_SOCK;
    if (!agent) throw new Error("SFTP 存储需要配置 pass、key_pem 或 key_file 之一");
    settings.agent = agent;
  }
  const knownHosts = (config.known_hosts_file ?? "").trim();
  // rclone accepts "none" to mean "do not check" explicitly.
  if (knownHosts !== "" && knownHosts !== "none") settings.knownHostsFile = expandHome(knownHosts);
  settings.hostKeySha256 = parseFingerprint(config.host_key_sha256 ?? "");
  settings.pinOnFirstUse = settings.hostKeySha256 === null && knownHosts === "";
  return settings;
}

/** `SHA256:` + 43 base64 characters (a padded or prefix-less paste is accepted and normalized); "" = none. */
export function parseFingerprint(raw: string): string | null {
  const text = raw.trim();
  if (text === "") return null;
  const body = text.replace(/^SHA256:/i, "").replace(/=+$/, "");
  if (!/^[A-Za-z0-9+/]{43}$/.test(body)) throw new Error("SFTP host_key_sha256 无效: 应为 ssh-keygen -lf 输出的 SHA256:… 指纹");
  return `SHA256:${body}`;
}

/**
 * rclone's default `user`: the account running the process. Looked up in
 * /etc/passwd by uid because Bun's os.userInfo() reports "unknown" as the name.
 */
export function currentUser(): string {
  const fromEnv = process.env.USER || process.env.LOGNAME;
  if (fromEnv) return fromEnv;
  return userNameOf(process.getuid?.()) ?? userInfo().username;
}

/** rclone reads key_pem with "\n" escapes for line breaks; accept that form as well as real newlines. */
function pemText(value: string): string {
  const text = value.includes("\n") ? value : value.replace(/\\r\\n|\\n/g, "\n");
  return `${text.trim()}\n`;
}

/** Parses the key once up front so a bad key is a config error, not a connection failure. */
export function checkKey(key: string, passphrase: string | undefined, option: string): void {
  const parsed = ssh2().utils.parseKey(key, passphrase);
  if (!(parsed instanceof Error)) return;
  const reason = /passphrase/i.test(parsed.message) ? "私钥已加密，需要正确的 key_file_pass" : "无法解析私钥 (支持 OpenSSH/PEM 格式)";
  throw new Error(`SFTP ${option} 无效: ${reason}`);
}

function expandHome(path: string): string {
  if (path === "~" || path.startsWith("~/")) return (process.env.HOME ?? userInfo().homedir) + path.slice(1);
  return path;
}

function normalizeRoot(raw: string): string {
  const trimmed = raw.trim();
  if (trimmed === "") return "";
  const absolute = trimmed.startsWith("/");
  const segments = trimmed.split("/").filter((s) => s !== "");
  if (segments.some((s) => s === "." || s === ".." || s.includes("\0") || s.includes("\\"))) {
    throw new Error("SFTP path 无效（不能包含 . 或 .. 路径段、反斜杠或 NUL）");
  }
  const joined = segments.join("/");
  return absolute ? `/${joined}` : joined;
}
