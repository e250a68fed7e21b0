import { invalidListing } from "../../oauth/paging";
import { OAuthError, safeCode } from "../../oauth/errors";
import { OAUTH_OPTION_SPECS, parseSize, PATH_OPTION, rootOf } from "../../oauth/driver-kit";
import { defaultApiOrigin, ONEDRIVE_REGIONS } from "../../oauth/providers";
import type { DriverOptionSpec } from "../option-spec";

export const ONEDRIVE_DRIVE_TYPES = ["personal", "business", "documentLibrary"] as const;

/** Keys named exactly like rclone's onedrive options, plus Kura's reserved `path`. */
export const onedriveDriverOptions: readonly DriverOptionSpec[] = [
  ...OAUTH_OPTION_SPECS,
  { key: "region", type: "select", required: false, sensitive: false, options: [...ONEDRIVE_REGIONS] },
  { key: "drive_id", type: "text", required: false, sensitive: true },
  { key: "drive_type", type: "select", required: false, sensitive: false, options: [...ONEDRIVE_DRIVE_TYPES] },
  { key: "chunk_size", type: "text", required: false, sensitive: false },
  PATH_OPTION,
];

/** rclone's defaults: 10 MiB upload-session chunks, which must be multiples of 320 KiB. */
const DEFAULT_CHUNK = 10 * 1024 * 1024;
export const CHUNK_MULTIPLE = 320 * 1024;
/** Graph's limit for a single-request upload (PUT …/content); larger files use an upload session. */
export const SIMPLE_UPLOAD_LIMIT = 4 * 1024 * 1024;

export interface OnedriveSettings {
  /** Graph API root, e.g. https://graph.microsoft.com/v1.0. */
  apiRoot: string;
  driveId: string;
  root: string;
  chunkSize: number;
}

export function resolveOnedriveSettings(config: Record<string, string>, apiBase?: string | null): OnedriveSettings {
  const driveType = config.drive_type?.trim() ?? "";
  if (driveType && !(ONEDRIVE_DRIVE_TYPES as readonly string[]).includes(driveType)) {
    throw new OAuthError(`OneDrive drive_type 无效，可选 ${ONEDRIVE_DRIVE_TYPES.join("/")}`);
  }
  const chunkSize = parseSize(config.chunk_size, "chunk_size", DEFAULT_CHUNK);
  if (chunkSize <= 0 || chunkSize % CHUNK_MULTIPLE !== 0) throw new OAuthError("OneDrive chunk_size 必须是 320k 的整数倍");
  const origin = apiBase ?? defaultApiOrigin("onedrive", config);
  return { apiRoot: `${origin}/v1.0`, driveId: config.drive_id?.trim() ?? "", root: rootOf(config, "OneDrive"), chunkSize };
}

/** Graph errors: {"error":{"code":"itemNotFound","message":…}}; only the code is kept. */
export function graphErrorCode(body: unknown): string {
  return safeCode((body as { error?: { code?: unknown } } | undefined)?.error?.code);
}

/** A driveItem as far as Kura reads it. */
export interface GraphItem {
  id?: string;
  name: string;
  size?: number;
  file?: object;
  folder?: object;
  lastModifiedDateTime?: string;
}

export interface GraphDrive {
  id: string;
  driveType?: string;
}

/** One page of a folder's children, as Microsoft Graph sends it. */
export interface GraphPage {
  value: GraphItem[];
  nextLink: string | undefined;
}

/**
 * A children page checked before it is believed: an answer without a `value` array (a proxy's
 * `{}`, `null`) read as an empty folder let a purge remove a channel whose objects remained.
 */
export function graphPage(answer: unknown): GraphPage {
  const fail = (why: string) => invalidListing("OneDrive", why);
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) throw fail("不是 JSON 对象");
  const { value, "@odata.nextLink": nextLink } = answer as { value?: unknown; "@odata.nextLink"?: unknown };
  if (!Array.isArray(value)) throw fail("缺少 value 数组");
  if (nextLink !== undefined && typeof nextLink !== "string") throw fail("@odata.nextLink 不是字符串");
  for (const item of value as Partial<Record<keyof GraphItem, unknown>>[]) {
    const valid = typeof item === "object" && item !== null && typeof item.name === "string" && (item.size === undefined || typeof item.size === "number");
    if (!valid) throw fail("value 中有无效的条目");
  }
  return { value: value as GraphItem[], nextLink: nextLink || undefined };
}
