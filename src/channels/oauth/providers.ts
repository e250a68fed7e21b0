/**
 * What Kura knows about each OAuth storage provider: the authorization and
 * token endpoints (overridable per channel with rclone's own `auth_url` /
 * `token_url` options), the scopes rclone asks for, and the API origin.
 *
 * The API origin has no rclone option. For testing against a local fake it can
 * be replaced process-wide with `KURA_OAUTH_API_BASE_<DRIVER>` (e.g.
 * KURA_OAUTH_API_BASE_ONEDRIVE=http://127.0.0.1:9000), read once. It is Kura's
 * own knob: it never enters a channel config, so the rclone export never sees it.
 */
export type OAuthDriverKind = "onedrive" | "drive" | "dropbox";

export const OAUTH_DRIVERS: readonly OAuthDriverKind[] = ["onedrive", "drive", "dropbox"];

export function isOAuthDriver(kind: string): kind is OAuthDriverKind {
  return (OAUTH_DRIVERS as readonly string[]).includes(kind);
}

/** OneDrive national clouds, as rclone's `region` option. */
export const ONEDRIVE_REGIONS = ["global", "us", "de", "cn"] as const;
const GRAPH_ORIGIN: Record<string, string> = {
  global: "https://graph.microsoft.com",
  us: "https://graph.microsoft.us",
  de: "https://graph.microsoft.de",
  cn: "https://microsoftgraph.chinacloudapi.cn",
};
const MICROSOFT_LOGIN: Record<string, string> = {
  global: "https://login.microsoftonline.com",
  us: "https://login.microsoftonline.us",
  de: "https://login.microsoftonline.de",
  cn: "https://login.chinacloudapi.cn",
};

/** Google Drive scopes Kura can write with (rclone's `scope` values). */
export const DRIVE_SCOPES = ["drive", "drive.file"] as const;

export interface ProviderEndpoints {
  label: string;
  authUrl: string;
  tokenUrl: string;
  scopes: string[];
  /** Extra authorization-request parameters that make the provider issue a refresh token. */
  authParams: Record<string, string>;
}

/** Default endpoints for a config; `auth_url` / `token_url` in the config win (rclone semantics). */
export function providerEndpoints(kind: OAuthDriverKind, config: Record<string, string>): ProviderEndpoints {
  const pick = (key: "auth_url" | "token_url", fallback: string) => config[key]?.trim() || fallback;
  switch (kind) {
    case "onedrive": {
      const login = MICROSOFT_LOGIN[onedriveRegion(config)]!;
      return {
        label: "OneDrive",
        authUrl: pick("auth_url", `${login}/common/oauth2/v2.0/authorize`),
        tokenUrl: pick("token_url", `${login}/common/oauth2/v2.0/token`),
        scopes: ["Files.Read", "Files.ReadWrite", "Files.Read.All", "Files.ReadWrite.All", "Sites.Read.All", "offline_access"],
        authParams: {},
      };
    }
    case "drive":
      return {
        label: "Google Drive",
        authUrl: pick("auth_url", "https://accounts.google.com/o/oauth2/auth"),
        tokenUrl: pick("token_url", "https://oauth2.googleapis.com/token"),
        scopes: [`https://www.googleapis.com/auth/${driveScope(config)}`],
        // Google issues a refresh token only for offline access, and again only with consent.
        authParams: { access_type: "offline", prompt: "consent" },
      };
    case "dropbox":
      return {
        label: "Dropbox",
        authUrl: pick("auth_url", "https://www.dropbox.com/oauth2/authorize"),
        tokenUrl: pick("token_url", "https://api.dropboxapi.com/oauth2/token"),
        scopes: ["files.metadata.write", "files.content.write", "files.content.read", "account_info.read"],
        authParams: { token_access_type: "offline" },
      };
  }
}

export function onedriveRegion(config: Record<string, string>): string {
  const region = config.region?.trim() || "global";
  if (!(ONEDRIVE_REGIONS as readonly string[]).includes(region)) throw new Error(`OneDrive region 无效，可选 ${ONEDRIVE_REGIONS.join("/")}`);
  return region;
}

export function driveScope(config: Record<string, string>): string {
  // rclone accepts a comma-separated list; Kura uses the first scope (the one that grants writing).
  const scope = (config.scope?.split(",")[0] ?? "").trim() || "drive";
  if (!(DRIVE_SCOPES as readonly string[]).includes(scope)) throw new Error(`Google Drive scope 无效，可选 ${DRIVE_SCOPES.join("/")}`);
  return scope;
}

/** The provider's real API origin(s) for a config. */
export function defaultApiOrigin(kind: OAuthDriverKind, config: Record<string, string>): string {
  switch (kind) {
    case "onedrive":
      return GRAPH_ORIGIN[onedriveRegion(config)]!;
    case "drive":
      return "https://www.googleapis.com";
    case "dropbox":
      return "https://api.dropboxapi.com";
  }
}

const overrides = new Map<OAuthDriverKind, string | null>();

/** `KURA_OAUTH_API_BASE_<DRIVER>` (testing against a local fake), read once per process; null when unset. */
export function apiBaseOverride(kind: OAuthDriverKind): string | null {
  if (!overrides.has(kind)) {
    const raw = process.env[`KURA_OAUTH_API_BASE_${kind.toUpperCase()}`]?.trim() ?? "";
    overrides.set(kind, /^https?:\/\/[^\s/]+\/?$/i.test(raw) ? raw.replace(/\/+$/, "") : null);
  }
  return overrides.get(kind)!;
}

/** Checks an endpoint URL from a config (auth_url / token_url): http(s), no credentials. */
export function checkEndpointUrl(value: string, key: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`${key} 不是有效的地址`);
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username || url.password) {
    throw new Error(`${key} 必须是不含用户名和密码的 http(s) 地址`);
  }
  return url.href;
}
