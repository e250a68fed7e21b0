/**
 * Spec 4.7 rule 2: creating a channel of an authorization-requiring backend
 * first completes the parameters the authorization brings — OneDrive's
 * default drive (drive_id / drive_type) and Google Drive's root folder id —
 * exactly what `rclone config` would have stored, so the rclone export works.
 * A provider that cannot be asked makes creation fail with 400.
 */
import { Invalid } from "../../errors";
import { createDriveDriver } from "../drivers/drive";
import { ONEDRIVE_DRIVE_TYPES } from "../drivers/onedrive/config";
import { createOnedriveDriver } from "../drivers/onedrive";
import { scrubChannelError } from "../masking";
import type { ResolvedSource } from "../source";
import { buildTemplateConfig, findTemplate } from "../templates";
import { apiBaseOverride } from "./providers";

/** The source with some backend values set (in the form inputs too, for a template channel). */
export function withValues(source: ResolvedSource, values: Record<string, string>): ResolvedSource {
  const template = source.template ? findTemplate(source.template) : undefined;
  if (template && source.inputs) {
    const inputs = { ...source.inputs, ...values };
    return { ...source, inputs, config: buildTemplateConfig(template, inputs) };
  }
  return { ...source, config: { ...source.config, ...values } };
}

/** The refreshed token replaces the submitted one wherever it was given. */
export function withToken(source: ResolvedSource, token: string): ResolvedSource {
  return {
    ...source,
    config: { ...source.config, token },
    ...(source.inputs && Object.hasOwn(source.inputs, "token") ? { inputs: { ...source.inputs, token } } : {}),
  };
}

/**
 * Asks the provider for what is missing. `onTokenRefreshed` hears about a
 * token refreshed on the way (the caller must save that one, not the old).
 */
export async function completeFromProvider(source: ResolvedSource, onTokenRefreshed: (token: string) => void): Promise<ResolvedSource> {
  const hooks = { onTokenRefreshed };
  const ask = async <T>(what: string, query: () => Promise<T>): Promise<T> => {
    try {
      return await query();
    } catch (err) {
      const reason = scrubChannelError((err as Error).message || "请求失败", source);
      throw new Invalid(`向存储服务查询${what}失败：${reason}`);
    }
  };
  if (source.driver === "onedrive" && !source.config.drive_id?.trim()) {
    const drive = await ask("默认驱动器", () => createOnedriveDriver(source.config, { ...hooks, apiBase: apiBaseOverride("onedrive") }).defaultDrive());
    const driveType = (ONEDRIVE_DRIVE_TYPES as readonly string[]).includes(drive.driveType) ? drive.driveType : (source.config.drive_type ?? "");
    return withValues(source, { drive_id: drive.id, ...(driveType ? { drive_type: driveType } : {}) });
  }
  if (source.driver === "drive" && !source.config.root_folder_id?.trim()) {
    const id = await ask("根文件夹", () => createDriveDriver(source.config, { ...hooks, apiBase: apiBaseOverride("drive") }).rootFolderId());
    return withValues(source, { root_folder_id: id });
  }
  return source;
}
