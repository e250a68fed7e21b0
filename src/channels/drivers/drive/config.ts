import { OAuthError, safeCode } from "../../oauth/errors";
import { OAUTH_OPTION_SPECS, parseSize, PATH_OPTION, rootOf } from "../../oauth/driver-kit";
import { defaultApiOrigin, DRIVE_SCOPES, driveScope } from "../../oauth/providers";
import { parseBool, type DriverOptionSpec } from "../option-spec";

/** Keys named exactly like rclone's drive options, plus Kura's reserved `path`. */
export const driveDriverOptions: readonly DriverOptionSpec[] = [
  ...OAUTH_OPTION_SPECS,
  { key: "scope", type: "select", required: false, sensitive: false, options: [...DRIVE_SCOPES] },
  { key: "root_folder_id", type: "text", required: false, sensitive: true },
  { key: "chunk_size", type: "text", required: false, sensitive: false },
  { key: "upload_cutoff", type: "text", required: false, sensitive: false },
  { key: "use_trash", type: "bool", required: false, sensitive: false },
  PATH_OPTION,
];

export const FOLDER_MIME = "application/vnd.google-apps.folder";
/** rclone's defaults: 8 MiB chunks (a power of two ≥ 256 KiB) and an 8 MiB cutoff for resumable uploads. */
const DEFAULT_CHUNK = 8 * 1024 * 1024;
const MIN_CHUNK = 256 * 1024;

export interface DriveSettings {
  filesUrl: string;
  uploadUrl: string;
  /** root_folder_id, or Google's alias "root" for My Drive. */
  rootFolderId: string;
  root: string;
  chunkSize: number;
  uploadCutoff: number;
  useTrash: boolean;
}

export function resolveDriveSettings(config: Record<string, string>, apiBase?: string | null): DriveSettings {
  driveScope(config);
  const chunkSize = parseSize(config.chunk_size, "chunk_size", DEFAULT_CHUNK);
  if (chunkSize < MIN_CHUNK || (chunkSize & (chunkSize - 1)) !== 0) throw new OAuthError("Google Drive chunk_size 必须是不小于 256k 的 2 的幂");
  let useTrash: boolean;
  try {
    useTrash = parseBool(config.use_trash, true);
  } catch {
    throw new OAuthError("Google Drive use_trash 必须是布尔值");
  }
  const origin = apiBase ?? defaultApiOrigin("drive", config);
  return {
    filesUrl: `${origin}/drive/v3/files`,
    uploadUrl: `${origin}/upload/drive/v3/files`,
    rootFolderId: config.root_folder_id?.trim() || "root",
    root: rootOf(config, "Google Drive"),
    chunkSize,
    uploadCutoff: parseSize(config.upload_cutoff, "upload_cutoff", DEFAULT_CHUNK),
    useTrash,
  };
}

/** Google errors: {"error":{"errors":[{"reason":"notFound"}],"code":404,"message":…}}; only the reason is kept. */
export function googleErrorCode(body: unknown): string {
  const error = (body as { error?: { errors?: { reason?: unknown }[]; status?: unknown } } | undefined)?.error;
  return safeCode(error?.errors?.[0]?.reason) || safeCode(error?.status);
}

export interface DriveFile {
  id: string;
  name: string;
  mimeType: string;
  size?: string;
  modifiedTime?: string;
}

export const FILE_FIELDS = "id,name,mimeType,size,modifiedTime";

/** A string literal in a files.list query: backslash and single quote escaped. */
export function queryString(value: string): string {
  return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}
