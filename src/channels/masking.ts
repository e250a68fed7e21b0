/**
 * Secrets never leave the server: reading a channel's config replaces every
 * sensitive value with a sentinel, and sending the sentinel back means "keep
 * what is stored" (spec 4.7 rules 5–7). The sentinel is accepted only where it
 * could have come from a read, so it can never smuggle in a value of a key
 * that was not masked, nor silently blank a credential.
 */
import { CHANNEL_LEVEL_KEYS } from "./drivers/option-spec";
import { driverOptionSpecs } from "./factory";
import { reveal } from "./rclone/obscure";
import { findTemplate, isSensitiveInput } from "./templates";

export const SECRET_SENTINEL = "__kura_secret_keep__";

/** Template inputs a template does not declare, and keys of a backend without specs, are judged by name. */
const SENSITIVE_NAME = /(pass|secret|token|credential|client_id|access_key|private_key|key_pem|account)/i;

/**
 * A declared option is sensitive as its spec says. A key the backend does not declare is one
 * Kura's driver ignores but an rclone config pasted in may carry (it goes to the rclone export):
 * it is treated as sensitive, since its meaning is unknown here and rclone's own secret options
 * have names no pattern catches (`sse_customer_key`, an SSE-C key, was shown in plain text and
 * kept in the audit log).
 */
export function isSensitiveConfigKey(driver: string, key: string): boolean {
  const specs = driverOptionSpecs(driver);
  const spec = specs.find((o) => o.key === key);
  if (spec) return spec.sensitive || spec.type === "password";
  if (CHANNEL_LEVEL_KEYS.has(key)) return false;
  return specs.length > 0 || SENSITIVE_NAME.test(key);
}

export function isSensitiveTemplateInput(templateId: string, key: string): boolean {
  const template = findTemplate(templateId);
  return template ? isSensitiveInput(template, key) : SENSITIVE_NAME.test(key);
}

/** A copy with every non-empty sensitive value replaced by the sentinel. */
export function maskValues(values: Record<string, string>, isSensitive: (key: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) out[k] = v !== "" && isSensitive(k) ? SECRET_SENTINEL : v;
  return out;
}

/** Which keys a read would have masked: the only keys where the sentinel is accepted. */
export function maskedKeys(values: Record<string, string> | undefined, isSensitive: (key: string) => boolean): Set<string> {
  return new Set(
    Object.entries(values ?? {})
      .filter(([k, v]) => v !== "" && isSensitive(k))
      .map(([k]) => k),
  );
}

export class SentinelMisuseError extends Error {
  constructor(readonly key: string) {
    super(`字段 ${key} 没有已保存的凭据可保留，不能使用占位值 ${SECRET_SENTINEL}`);
  }
}

/** Replaces sentinels with the stored values; throws SentinelMisuseError on a key that was not masked. */
export function restoreSentinels(
  submitted: Record<string, string>,
  stored: Record<string, string> | undefined,
  isSensitive: (key: string) => boolean,
): Record<string, string> {
  const allowed = maskedKeys(stored, isSensitive);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(submitted)) {
    if (v !== SECRET_SENTINEL) out[k] = v;
    else if (allowed.has(k)) out[k] = stored![k]!;
    else throw new SentinelMisuseError(k);
  }
  return out;
}

/**
 * For audit details (spec 2.9): non-sensitive values as they are, sensitive
 * ones only as "set" / "empty".
 */
export function auditMarkers(values: Record<string, string>, isSensitive: (key: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) out[k] = isSensitive(k) ? (v === "" ? "empty" : "set") : v;
  return out;
}

/**
 * Backend error messages are built to be credential-free, but a probe error is
 * shown to the admin and stored as last_error, so any sensitive value that
 * still appears in it is cut out as a last line of defence.
 */
export function scrubSecrets(message: string, secrets: readonly string[]): string {
  let out = message;
  for (const secret of secrets) if (secret.length >= 4) out = out.split(secret).join("***");
  return out;
}

/**
 * A channel error made safe to store, show and log: every sensitive value of the channel
 * (config and template inputs, obscured ones also in plain form) cut out. Used by every
 * probe path, for saved channels and for configs about to be saved alike.
 */
export function scrubChannelError(
  message: string,
  channel: { driver: string; template?: string; config: Record<string, string>; inputs?: Record<string, string> },
): string {
  return scrubSecrets(message, secretValues(channel.driver, channel.config, channel.template, channel.inputs));
}

/** Every sensitive value of a config and its template inputs (the plain form of obscured passwords included). */
/** The access and refresh tokens inside an OAuth token JSON value, which could leak on their own. */
function tokenParts(value: string): string[] {
  if (!value.trimStart().startsWith("{")) return [];
  try {
    const parsed = JSON.parse(value) as Record<string, unknown>;
    return ["access_token", "refresh_token"].map((k) => parsed[k]).filter((t): t is string => typeof t === "string" && t.length >= 8);
  } catch {
    return [];
  }
}

export function secretValues(driver: string, config: Record<string, string>, templateId = "", inputs: Record<string, string> = {}): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(config)) {
    if (!isSensitiveConfigKey(driver, k) || v === "") continue;
    out.push(v, ...tokenParts(v));
    try {
      out.push(reveal(v));
    } catch {
      // Not an obscured value.
    }
  }
  for (const [k, v] of Object.entries(inputs)) if (v !== "" && isSensitiveTemplateInput(templateId, k)) out.push(v);
  return out;
}
