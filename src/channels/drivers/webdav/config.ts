import { assertSafeRootPath } from "../object-key";
import { revealOption, type DriverOptionSpec } from "../option-spec";

/**
 * Vendors Kura can talk to. rclone 1.60 also knows `sharepoint` (Microsoft
 * account cookie login) and `sharepoint-ntlm`; neither is implemented here, so
 * they are not offered, and a config naming them is refused rather than half-used.
 */
export const WEBDAV_VENDORS = ["nextcloud", "owncloud", "other"] as const;
export type WebdavVendor = (typeof WEBDAV_VENDORS)[number];

/** Keys named exactly like rclone's webdav backend options, plus Kura's reserved `path`. */
export const webdavDriverOptions: readonly DriverOptionSpec[] = [
  { key: "url", type: "text", required: true, sensitive: false },
  { key: "vendor", type: "select", required: false, sensitive: false, options: [...WEBDAV_VENDORS], default: "other" },
  { key: "user", type: "text", required: false, sensitive: true },
  // Stored obscured, exactly as `rclone config` stores it (rclone's IsPassword).
  { key: "pass", type: "password", required: false, sensitive: true },
  { key: "bearer_token", type: "password", required: false, sensitive: true },
  { key: "path", type: "text", required: false, sensitive: false },
];

export interface WebdavSettings {
  /** The configured `url` as a collection URL (always ends with '/'). */
  endpoint: URL;
  /** `path` inside the endpoint, '/'-separated without leading/trailing '/'; "" = the endpoint itself. */
  root: string;
  vendor: WebdavVendor;
  /** Full Authorization header value, or null for anonymous access. */
  authorization: string | null;
}

export function resolveWebdavSettings(config: Record<string, string>): WebdavSettings {
  const rawUrl = (config.url ?? "").trim();
  if (rawUrl === "") throw new Error("WebDAV 存储缺少 url 配置");
  let endpoint: URL;
  try {
    endpoint = new URL(rawUrl);
  } catch {
    throw new Error("WebDAV url 格式无效");
  }
  if (endpoint.protocol !== "http:" && endpoint.protocol !== "https:") {
    throw new Error("WebDAV url 必须以 http:// 或 https:// 开头");
  }
  // Credentials in the URL would end up in logs and error messages; rclone keeps them in user/pass too.
  if (endpoint.username || endpoint.password) throw new Error("WebDAV url 中不能包含用户名或密码，请填写 user/pass");
  endpoint.search = "";
  endpoint.hash = "";
  // Like rclone: the url names a collection, so it always ends with '/'.
  if (!endpoint.pathname.endsWith("/")) endpoint.pathname += "/";

  const vendor = (config.vendor ?? "").trim() || "other";
  if (vendor === "sharepoint" || vendor === "sharepoint-ntlm") throw new Error(`WebDAV vendor 暂不支持 SharePoint，可选 ${WEBDAV_VENDORS.join("、")}`);
  if (!(WEBDAV_VENDORS as readonly string[]).includes(vendor)) throw new Error(`WebDAV vendor 无效，可选 ${WEBDAV_VENDORS.join("、")}`);

  const root = (config.path ?? "").trim().replace(/^\/+|\/+$/g, "");
  if (root !== "") assertSafeRootPath(root, "WebDAV");

  return {
    endpoint,
    root,
    vendor: vendor as WebdavVendor,
    authorization: authorizationOf(config),
  };
}

/** rclone's order: user/pass (Basic) wins over bearer_token. */
function authorizationOf(config: Record<string, string>): string | null {
  const user = config.user ?? "";
  const obscured = config.pass ?? "";
  if (user !== "" || obscured !== "") {
    const pass = obscured !== "" ? revealOption("WebDAV", "pass", obscured) : "";
    return `Basic ${Buffer.from(`${user}:${pass}`, "utf8").toString("base64")}`;
  }
  const token = (config.bearer_token ?? "").trim();
  return token !== "" ? `Bearer ${token}` : null;
}

/** Vendor quirks rclone applies that are harmless for us (see webdav.ts). */
export function usesOwncloudExtensions(vendor: WebdavVendor): boolean {
  return vendor === "nextcloud" || vendor === "owncloud";
}
