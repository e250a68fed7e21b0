import { OAuthError, safeCode } from "../../oauth/errors";
import { OAUTH_OPTION_SPECS, parseSize, PATH_OPTION, rootOf } from "../../oauth/driver-kit";
import type { DriverOptionSpec } from "../option-spec";
import { invalidListing } from "../../oauth/paging";

/** Keys named exactly like rclone's dropbox options, plus Kura's reserved `path`. */
export const dropboxDriverOptions: readonly DriverOptionSpec[] = [
  ...OAUTH_OPTION_SPECS,
  { key: "chunk_size", type: "text", required: false, sensitive: false },
  PATH_OPTION,
];

/** rclone's default upload chunk (48 MiB) and Dropbox's per-request maximum (150 MiB). */
const DEFAULT_CHUNK = 48 * 1024 * 1024;
const MAX_CHUNK = 150 * 1024 * 1024;

export interface DropboxSettings {
  /** RPC endpoints (api.dropboxapi.com). */
  apiUrl: string;
  /** Upload/download endpoints (content.dropboxapi.com). */
  contentUrl: string;
  root: string;
  chunkSize: number;
}

export function resolveDropboxSettings(config: Record<string, string>, apiBase?: string | null): DropboxSettings {
  const chunkSize = parseSize(config.chunk_size, "chunk_size", DEFAULT_CHUNK);
  if (chunkSize <= 0 || chunkSize > MAX_CHUNK) throw new OAuthError("Dropbox chunk_size 必须大于 0 且不超过 150M");
  return {
    // Both hosts are replaced by the one test origin; their paths do not overlap.
    apiUrl: `${apiBase ?? "https://api.dropboxapi.com"}/2`,
    contentUrl: `${apiBase ?? "https://content.dropboxapi.com"}/2`,
    root: rootOf(config, "Dropbox"),
    chunkSize,
  };
}

/** Dropbox errors: {"error_summary":"path/not_found/..","error":{…}}; the summary without its trailing "/.." is the code. */
export function dropboxErrorCode(body: unknown): string {
  const summary = (body as { error_summary?: unknown } | undefined)?.error_summary;
  return typeof summary === "string" ? safeCode(summary.replace(/\/*\.*$/, "")) : "";
}

/** JSON for the Dropbox-API-Arg header: every non-ASCII character escaped, as Dropbox requires. */
export function headerJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export interface DropboxEntry {
  ".tag": "file" | "folder" | "deleted";
  name: string;
  path_display?: string;
  path_lower?: string;
  size?: number;
  server_modified?: string;
}

/** A list_folder(/continue) answer; `cursor` is the next page's when `has_more`. */
export interface DropboxPage {
  entries: DropboxEntry[];
  cursor: string;
  has_more: boolean;
}

/**
 * A list_folder answer, refused unless it has the shape Dropbox always sends (`entries`,
 * `cursor`, `has_more`): `{}` or `null` (an error object of a proxy, a cut answer) must not read
 * as an empty folder, after which a purge would remove a channel whose objects remain.
 */
export function dropboxPage(answer: unknown): DropboxPage {
  const fail = (why: string) => invalidListing("Dropbox", why);
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) throw fail("不是 JSON 对象");
  const { entries, cursor, has_more } = answer as { entries?: unknown; cursor?: unknown; has_more?: unknown };
  if (!Array.isArray(entries)) throw fail("缺少 entries 数组");
  if (typeof has_more !== "boolean") throw fail("has_more 不是布尔值");
  if (typeof cursor !== "string" || (has_more && cursor === "")) throw fail("缺少 cursor");
  for (const entry of entries as Partial<Record<keyof DropboxEntry, unknown>>[]) {
    const valid =
      typeof entry === "object" &&
      entry !== null &&
      typeof entry[".tag"] === "string" &&
      typeof entry.name === "string" &&
      (entry.size === undefined || (typeof entry.size === "number" && Number.isSafeInteger(entry.size) && entry.size >= 0));
    if (!valid) throw fail("entries 中有无效的条目");
  }
  return { entries: entries as DropboxEntry[], cursor, has_more };
}
