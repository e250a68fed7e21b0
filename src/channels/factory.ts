import type { Driver } from "./driver";
import { createLocalDriver, localDriverOptions } from "./drivers/local";
import type { DriverOptionSpec } from "./drivers/option-spec";
import { createS3Driver, s3DriverOptions } from "./drivers/s3";
import { createSftpDriver, sftpDriverOptions } from "./drivers/sftp";
import { createWebdavDriver, webdavDriverOptions } from "./drivers/webdav";
import { createOnedriveDriver, onedriveDriverOptions } from "./drivers/onedrive";
import { createDriveDriver, driveDriverOptions } from "./drivers/drive";
import { createDropboxDriver, dropboxDriverOptions } from "./drivers/dropbox";
import { apiBaseOverride, type OAuthDriverKind } from "./oauth/providers";

/** What the owner of a driver wants to hear about (OAuth tokens, SFTP host keys) and the deployment's facts. */
export interface DriverHooks {
  /** The driver refreshed its OAuth token; the new `token` value (rclone JSON) should be stored. */
  onTokenRefreshed?: (tokenJson: string) => void;
  /** SFTP: the host key a first-use connection trusted (`SHA256:…`); the owner stores it as `host_key_sha256`. */
  onHostKey?: (fingerprint: string) => void;
  /** The data directory, under which a relative local `path` lies. */
  dataDir?: string;
  /**
   * How long a network channel's peer (S3, WebDAV, SFTP, an OAuth provider's API) may take to
   * answer, and stay silent inside an answer's body, before the attempt fails and the next channel
   * is tried (`KURA_CHANNEL_TIMEOUT_MS`; drivers default to 30 s, SFTP 15 s, OAuth APIs 60 s). A
   * peer that accepts connections and never answers costs this long per attempt.
   */
  peerTimeoutMs?: number;
}

/** The part of the hooks that comes from the deployment (bootstrap), the same for every channel. */
export type DriverSite = Pick<DriverHooks, "dataDir" | "peerTimeoutMs">;

export const driverSiteOf = (boot: { dataDir: string; channelTimeoutMs?: number }): DriverSite => ({
  dataDir: boot.dataDir,
  peerTimeoutMs: boot.channelTimeoutMs,
});

/** An OAuth driver's options: the owner's token hook, the deployment's timeout, a test's API origin. */
export const oauthHookOptions = (hooks: DriverHooks, kind: OAuthDriverKind) => ({
  onTokenRefreshed: hooks.onTokenRefreshed,
  timeoutMs: hooks.peerTimeoutMs,
  apiBase: apiBaseOverride(kind),
});

type DriverFactory = (config: Record<string, string>, hooks: DriverHooks) => Driver;

/** Backends by rclone type name. */
const FACTORIES: Record<string, DriverFactory> = {
  local: (config, hooks) => createLocalDriver(config, hooks.dataDir),
  s3: (config, hooks) => createS3Driver(config, { timeoutMs: hooks.peerTimeoutMs }),
  webdav: (config, hooks) => createWebdavDriver(config, { timeoutMs: hooks.peerTimeoutMs }),
  sftp: (config, hooks) => createSftpDriver(config, { timeoutMs: hooks.peerTimeoutMs, onHostKey: hooks.onHostKey }),
  onedrive: (config, hooks) => createOnedriveDriver(config, oauthHookOptions(hooks, "onedrive")),
  drive: (config, hooks) => createDriveDriver(config, oauthHookOptions(hooks, "drive")),
  dropbox: (config, hooks) => createDropboxDriver(config, oauthHookOptions(hooks, "dropbox")),
};

/** Each backend's declared options (rclone names): masking on read and the rclone export use them. */
const OPTION_SPECS: Record<string, readonly DriverOptionSpec[]> = {
  local: localDriverOptions,
  s3: s3DriverOptions,
  webdav: webdavDriverOptions,
  sftp: sftpDriverOptions,
  onedrive: onedriveDriverOptions,
  drive: driveDriverOptions,
  dropbox: dropboxDriverOptions,
};

export function knownDriver(kind: string): boolean {
  return Object.hasOwn(FACTORIES, kind);
}

/** Declared options of a backend; empty for a backend Kura cannot build (yet). */
export function driverOptionSpecs(kind: string): readonly DriverOptionSpec[] {
  return Object.hasOwn(OPTION_SPECS, kind) ? OPTION_SPECS[kind]! : [];
}

export function createDriver(kind: string, config: Record<string, string>, hooks: DriverHooks = {}): Driver {
  const factory = Object.hasOwn(FACTORIES, kind) ? FACTORIES[kind] : undefined;
  if (!factory) throw new Error(`不支持的存储驱动: ${kind}`);
  return factory(config, hooks);
}
