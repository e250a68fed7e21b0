import type { Driver } from "./driver";
import { createLocalDriver, localDriverOptions } from "./drivers/local";
import type { DriverOptionSpec } from "./drivers/option-spec";
import { createS3Driver, s3DriverOptions } from "./drivers/s3";
import { createSftpDriver, sftpDriverOptions } from "./drivers/sftp";
import { createWebdavDriver, webdavDriverOptions } from "./drivers/webdav";

type DriverFactory = (config: Record<string, string>) => Driver;

/** Backends by rclone type name. */
const FACTORIES: Record<string, DriverFactory> = {
  local: createLocalDriver,
  s3: (config) => createS3Driver(config),
  webdav: (config) => createWebdavDriver(config),
  sftp: (config) => createSftpDriver(config),
};

/** Each backend's declared options (rclone names): masking on read and the rclone export use them. */
const OPTION_SPECS: Record<string, readonly DriverOptionSpec[]> = {
  local: localDriverOptions,
  s3: s3DriverOptions,
  webdav: webdavDriverOptions,
  sftp: sftpDriverOptions,
};

export function knownDriver(kind: string): boolean {
  return Object.hasOwn(FACTORIES, kind);
}

/** Declared options of a backend; empty for a backend Kura cannot build (yet). */
export function driverOptionSpecs(kind: string): readonly DriverOptionSpec[] {
  return Object.hasOwn(OPTION_SPECS, kind) ? OPTION_SPECS[kind]! : [];
}

export function createDriver(kind: string, config: Record<string, string>): Driver {
  const factory = Object.hasOwn(FACTORIES, kind) ? FACTORIES[kind] : undefined;
  if (!factory) throw new Error(`不支持的存储驱动: ${kind}`);
  return factory(config);
}
