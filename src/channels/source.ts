/**
 * Where a channel's backend configuration comes from in a create / test / PUT
 * body: template mode (`template` + `inputs`) or custom mode (`driver` +
 * `config`), with sentinels restored from the stored channel (spec 4.7).
 */
import { Invalid } from "../errors";
import { z } from "zod";
import { knownDriver } from "./factory";
import { isSensitiveConfigKey, isSensitiveTemplateInput, restoreSentinels, SECRET_SENTINEL, SentinelMisuseError } from "./masking";
import type { ChannelRow, ChannelSecrets } from "./repo";
import { buildTemplateConfig, findTemplate, TemplateInputError } from "./templates";

/** Form values may arrive as JSON numbers or booleans; the config is strings, as in rclone. */
const scalar = z.union([z.string().max(65_536), z.number(), z.boolean()]).transform(String);
const valueMap = z.record(z.string().max(64), scalar).refine((m) => Object.keys(m).length <= 100, "字段过多");

const name = z
  .string()
  .trim()
  .min(1)
  .refine((s) => [...s].length <= 64)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s));

export const sourceFields = {
  template: z.string().max(64).optional(),
  inputs: valueMap.optional(),
  driver: z.string().max(32).optional(),
  config: valueMap.optional(),
  auto_create_bucket: z.boolean().optional(),
};
const int64 = z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);

export const createBody = z.strictObject({
  ...sourceFields,
  name,
  priority: int64.optional(),
  encrypted: z.boolean().optional(),
  allow_direct_link: z.boolean().optional(),
});

export const testBody = z.strictObject({
  ...sourceFields,
  name: z.string().max(256).optional(),
  priority: int64.optional(),
  encrypted: z.boolean().optional(),
  allow_direct_link: z.boolean().optional(),
  channel_id: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

export const updateBody = z.strictObject({
  ...sourceFields,
  name,
  priority: int64,
  allow_direct_link: z.boolean(),
  encrypted: z.boolean().optional(),
});

export type CreateChannelInput = z.infer<typeof createBody>;
export type TestChannelInput = z.infer<typeof testBody>;
export type UpdateChannelInput = z.infer<typeof updateBody>;

export type SourceInput = { template?: string; inputs?: Record<string, string>; driver?: string; config?: Record<string, string> };

export interface ResolvedSource {
  /** "" for custom mode. */
  template: string;
  driver: string;
  config: Record<string, string>;
  inputs?: Record<string, string>;
}

/** rclone option names (the export writes them as `name = value`). */
const CONFIG_KEY = /^[a-z0-9_]{1,64}$/;
/** The only values that may span lines: PEM keys and OAuth token JSON. */
const MULTILINE_KEYS = new Set(["key_pem", "token"]);

/**
 * Resolves the body to a driver and config. `stored` is the channel being
 * edited (PUT, or test with channel_id): its values replace sentinels, but only
 * on keys its read view masked, and only while template / driver stay the same.
 */
export function resolveSource(body: SourceInput, stored?: { row: ChannelRow; secrets: ChannelSecrets }): ResolvedSource {
  try {
    const source = body.template && body.template !== "custom" ? fromTemplate(body, body.template, stored) : fromCustom(body, stored);
    checkConfig(source.config);
    return source;
  } catch (err) {
    if (err instanceof SentinelMisuseError || err instanceof TemplateInputError) throw new Invalid(err.message);
    throw err;
  }
}

function fromTemplate(body: SourceInput, id: string, stored?: { row: ChannelRow; secrets: ChannelSecrets }): ResolvedSource {
  const template = findTemplate(id);
  if (!template) throw new Invalid(`未知的渠道模板: ${id}`);
  if (body.config !== undefined) throw new Invalid("模板模式下不能提交 config，请使用 inputs");
  if (body.driver !== undefined && body.driver !== template.driver) throw new Invalid("driver 与模板不符");
  const previous = stored && stored.row.template === template.id ? stored.secrets.inputs : undefined;
  const inputs = restoreSentinels(body.inputs ?? {}, previous, (k) => isSensitiveTemplateInput(template.id, k));
  return { template: template.id, driver: template.driver, config: buildTemplateConfig(template, inputs), inputs };
}

function fromCustom(body: SourceInput, stored?: { row: ChannelRow; secrets: ChannelSecrets }): ResolvedSource {
  if (body.inputs !== undefined) throw new Invalid("自定义模式下不能提交 inputs，请使用 driver 和 config");
  if (!body.driver) throw new Invalid("自定义模式需要 driver");
  if (body.config === undefined) throw new Invalid("自定义模式需要 config");
  const driver = body.driver;
  if (!knownDriver(driver)) throw new Invalid(`不支持的存储驱动: ${driver}`);
  const previous = stored && stored.row.driver === driver ? stored.secrets.config : undefined;
  const config = restoreSentinels(body.config, previous, (k) => isSensitiveConfigKey(driver, k));
  return { template: "", driver, config };
}

function checkConfig(config: Record<string, string>) {
  for (const [key, value] of Object.entries(config)) {
    if (!CONFIG_KEY.test(key)) throw new Invalid(`配置项名称无效: ${key.slice(0, 64)}`);
    if (value.includes("\0") || (!MULTILINE_KEYS.has(key) && /[\r\n]/.test(value))) throw new Invalid(`配置项 ${key} 的值不能包含换行或控制字符`);
  }
  const base = config.public_base_url;
  if (base) {
    let url: URL | undefined;
    try {
      url = new URL(base);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password) {
      throw new Invalid("public_base_url 必须是 http 或 https 地址");
    }
  }
}

/**
 * True when `body` keeps a stored secret (a sentinel) while the configuration it resolves to is
 * not the stored one: the stored secret is then sent where the request chose, which the audit
 * log records like an export (channel audit L1: a changed endpoint received the stored password).
 */
export function keepsSecretsElsewhere(body: SourceInput, source: ResolvedSource, stored: { row: ChannelRow; secrets: ChannelSecrets }): boolean {
  const kept = [...Object.values(body.config ?? {}), ...Object.values(body.inputs ?? {})].includes(SECRET_SENTINEL);
  return kept && (source.driver !== stored.row.driver || !sameValues(source.config, stored.secrets.config));
}

/** Same keys and values (order-insensitive). */
export function sameValues(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => Object.hasOwn(b ?? {}, k) && b![k] === a![k]);
}
