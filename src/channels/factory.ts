import type { Driver } from "./driver";
import { createLocalDriver } from "./drivers/local";
import { createS3Driver } from "./drivers/s3";

type DriverFactory = (config: Record<string, string>) => Driver;

/** Backends by rclone type name. */
const FACTORIES: Record<string, DriverFactory> = {
  local: createLocalDriver,
  s3: (config) => createS3Driver(config),
};

export function knownDriver(kind: string): boolean {
  return kind in FACTORIES;
}

export function createDriver(kind: string, config: Record<string, string>): Driver {
  const factory = FACTORIES[kind];
  if (!factory) throw new Error(`不支持的存储驱动: ${kind}`);
  return factory(config);
}
