/**
 * Static description of one driver config key, used to build channel templates
 * and to mask secrets on read. Keys are named exactly like rclone's backend
 * options so a channel can later be exported as a working rclone remote.
 */
export interface DriverOptionSpec {
  key: string;
  type: "text" | "password" | "bool" | "select" | "int";
  required: boolean;
  /** Masked with the sentinel when the config is read back. */
  sensitive: boolean;
  options?: string[];
  default?: string;
}

/** rclone's bool syntax ("true"/"false", also 1/0, yes/no); `fallback` when unset. */
export function parseBool(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value.trim() === "") return fallback;
  const v = value.trim().toLowerCase();
  if (["true", "1", "yes", "on", "t", "y"].includes(v)) return true;
  if (["false", "0", "no", "off", "f", "n"].includes(v)) return false;
  throw new Error(`配置值不是布尔值: ${value}`);
}
