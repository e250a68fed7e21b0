import { availableParallelism } from "node:os";
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
  /** `KURA_DELIVERY_THREADS`: extra threads serving `/i/` beside the main thread (threads/README in ARCHITECTURE.md). */
  deliveryThreads: DeliveryThreads;
}

/**
 * `auto` (default): on a machine with more than one core, up to 3 threads, started the first
 * time `/i/` traffic is busy (an idle server stays as small as one thread); a number: that many,
 * started at once; 0: the main thread serves everything.
 */
export type DeliveryThreads = { count: number; eager: boolean };

export const MAX_DELIVERY_THREADS = 16;

/** Where Kura keeps its data and listens when the environment does not say (also `kura help`'s text). */
export const DEFAULT_DATA_DIR = "./data";
export const DEFAULT_LISTEN = "0.0.0.0:8080";

export function parseDeliveryThreads(value: string | undefined, cores: number): DeliveryThreads {
  const text = value?.trim().toLowerCase() || "auto";
  if (text === "auto") return { count: Math.max(0, Math.min(3, cores - 1)), eager: false };
  if (!/^\d{1,2}$/.test(text) || Number(text) > MAX_DELIVERY_THREADS) {
    throw new BootstrapError(`KURA_DELIVERY_THREADS 必须是 auto 或 0 到 ${MAX_DELIVERY_THREADS} 之间的整数: ${value}`);
  }
  return { count: Number(text), eager: true };
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

/**
 * The data directory. An empty value is refused rather than read as the working directory: a
 * script's `KURA_DATA_DIR=$DATA` with DATA unset would otherwise make Kura treat wherever it was
 * started (a home directory) as its own.
 */
function dataDir(value: string | undefined): string {
  if (value === undefined) return resolve(DEFAULT_DATA_DIR);
  if (value.trim() === "") throw new BootstrapError("KURA_DATA_DIR 为空：请设置数据目录的路径，或不设置它以使用 ./data");
  return resolve(value);
}

/**
 * KURA_MASTER_KEY's form is checked with the other variables (exit 2, before the data directory is
 * touched): found only when the key was loaded, it ended the start with exit 1 after the lock file
 * was made, and the unit restarted into it every 2 s. The value itself is never repeated (a secret).
 */
function masterKeyEnv(value: string | undefined): string | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (!/^[0-9a-fA-F]{64}$/.test(text)) throw new BootstrapError(`KURA_MASTER_KEY 格式无效：需要 64 位十六进制（当前 ${text.length} 个字符）`);
  return text;
}

export function readBootstrap(env: Record<string, string | undefined> = process.env): Bootstrap {
  const metricsAllowText = env.KURA_METRICS_ALLOW ?? LOOPBACK_AND_PRIVATE;
  const trustedProxiesText = env.KURA_TRUSTED_PROXIES ?? "";
  return {
    listen: parseListen(env.KURA_LISTEN ?? DEFAULT_LISTEN),
    dataDir: dataDir(env.KURA_DATA_DIR),
    masterKeyEnv: masterKeyEnv(env.KURA_MASTER_KEY),
    metricsAllow: addressSet("KURA_METRICS_ALLOW", metricsAllowText),
    metricsAllowText,
    trustedProxies: addressSet("KURA_TRUSTED_PROXIES", trustedProxiesText),
    trustedProxiesText,
    importAllow: addressSet("KURA_IMPORT_ALLOW", env.KURA_IMPORT_ALLOW ?? ""),
    webhookAllow: addressSet("KURA_WEBHOOK_ALLOW", env.KURA_WEBHOOK_ALLOW ?? ""),
    cdnApiBase: cdnApiBase(env.KURA_CDN_API_BASE),
    channelTimeoutMs: channelTimeoutMs(env.KURA_CHANNEL_TIMEOUT_MS),
    deliveryThreads: parseDeliveryThreads(env.KURA_DELIVERY_THREADS, availableParallelism()),
  };
}
