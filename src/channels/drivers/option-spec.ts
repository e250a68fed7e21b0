import { reveal } from "../rclone/obscure";

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

/** Kura's own config keys, read by Kura for every driver (spec 2.7); rclone has no such backend options. */
export const CHANNEL_LEVEL_KEYS: ReadonlySet<string> = new Set(["path", "public_base_url"]);

/**
 * rclone's bool syntax ("true"/"false", also 1/0, yes/no); `fallback` when unset. A bad value is
 * refused naming the option (`name`), never echoing the value (spec 6.3).
 */
export function parseBool(value: string | undefined, fallback: boolean, name = "配置值"): boolean {
  if (value === undefined || value.trim() === "") return fallback;
  const v = value.trim().toLowerCase();
  if (["true", "1", "yes", "on", "t", "y"].includes(v)) return true;
  if (["false", "0", "no", "off", "f", "n"].includes(v)) return false;
  throw new Error(`${name} 不是布尔值（应为 true 或 false）`);
}

/** An rclone-obscured value (`password`-type keys), revealed; a bad one is a config error naming `label` and `name`. */
export function revealOption(label: string, name: string, obscured: string): string {
  try {
    return reveal(obscured);
  } catch (err) {
    // reveal() never echoes its input; its message says what kind of problem it was.
    throw new Error(`${label} ${name} 配置无效 (应为 rclone obscure 之后的值): ${(err as Error).message}`);
  }
}
