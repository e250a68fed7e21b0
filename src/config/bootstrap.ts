import { resolve } from "node:path";
import { LOOPBACK_AND_PRIVATE, parseAddressSet, type AddressSet } from "../net/cidr";

/** Values read once from the environment at start; everything else is a runtime setting. */
export interface Bootstrap {
  listen: { hostname: string; port: number; text: string };
  dataDir: string;
  /** Raw env value; undefined means "use master.key in the data dir". Never logged. */
  masterKeyEnv: string | undefined;
  metricsAllow: AddressSet;
  metricsAllowText: string;
  trustedProxies: AddressSet;
  trustedProxiesText: string;
  /** Extra networks URL import may reach (intranet deployments, tests). Empty by default. */
  importAllow: AddressSet;
  /** Extra networks the alert webhook may reach (an intranet alerting endpoint). Empty by default. */
  webhookAllow: AddressSet;
  /** CDN provider API root for cache purge (spec 4.13); overridden only for tests against a local fake. */
  cdnApiBase: string;
  /** `KURA_CHANNEL_TIMEOUT_MS`: the deadline for one answer of a network channel's peer; undefined = the drivers' 30 s. */
  channelTimeoutMs: number | undefined;
}

export const DEFAULT_CDN_API_BASE = "https://api.cloudflare.com/client/v4";

function cdnApiBase(value: string | undefined): string {
  const text = value?.trim() || DEFAULT_CDN_API_BASE;
  if (!/^https?:\/\/[^\s/]+(\/\S*)?$/i.test(text)) throw new BootstrapError(`KURA_CDN_API_BASE 必须是 http(s) 地址: ${text}`);
  return text.replace(/\/+$/, "");
}

export class BootstrapError extends Error {}

function channelTimeoutMs(value: string | undefined): number | undefined {
  const text = value?.trim() ?? "";
  if (!text) return undefined;
  // Below 100 ms no real peer answers; seven digits (~2.8 h) is far beyond any sensible deadline.
  if (!/^\d{1,7}$/.test(text) || Number(text) < 100) throw new BootstrapError(`KURA_CHANNEL_TIMEOUT_MS 必须是 100 到 9999999 之间的毫秒数: ${text}`);
  return Number(text);
}

export function parseListen(text: string): Bootstrap["listen"] {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new BootstrapError(`KURA_LISTEN 格式无效（应为 host:port）: ${text}`);
  const hostname = m[1] ?? (m[2] || "0.0.0.0");
  return { hostname, port, text: text.trim() };
}

function addressSet(name: string, value: string): AddressSet {
  try {
    return parseAddressSet(value);
  } catch (err) {
    throw new BootstrapError(`${name} 无效: ${(err as Error).message}`);
  }
}

export function readBootstrap(env: Record<string, string | undefined> = process.env): Bootstrap {
  const metricsAllowText = env.KURA_METRICS_ALLOW ?? LOOPBACK_AND_PRIVATE;
  const trustedProxiesText = env.KURA_TRUSTED_PROXIES ?? "";
  return {
    listen: parseListen(env.KURA_LISTEN ?? "0.0.0.0:8080"),
    dataDir: resolve(env.KURA_DATA_DIR ?? "./data"),
    masterKeyEnv: env.KURA_MASTER_KEY?.trim() || undefined,
    metricsAllow: addressSet("KURA_METRICS_ALLOW", metricsAllowText),
    metricsAllowText,
    trustedProxies: addressSet("KURA_TRUSTED_PROXIES", trustedProxiesText),
    trustedProxiesText,
    importAllow: addressSet("KURA_IMPORT_ALLOW", env.KURA_IMPORT_ALLOW ?? ""),
    webhookAllow: addressSet("KURA_WEBHOOK_ALLOW", env.KURA_WEBHOOK_ALLOW ?? ""),
    cdnApiBase: cdnApiBase(env.KURA_CDN_API_BASE),
    channelTimeoutMs: channelTimeoutMs(env.KURA_CHANNEL_TIMEOUT_MS),
  };
}
