import type { DriverOptionSpec } from "../option-spec";
import { parseBool } from "../option-spec";

/** Provider names exactly as rclone v1.60 (the Debian 12 build we interoperate with) lists them. */
export const S3_PROVIDERS = [
  "AWS",
  "Alibaba",
  "Ceph",
  "ChinaMobile",
  "Cloudflare",
  "ArvanCloud",
  "DigitalOcean",
  "Dreamhost",
  "HuaweiOBS",
  "IBMCOS",
  "IDrive",
  "IONOS",
  "LyveCloud",
  "Minio",
  "Netease",
  "RackCorp",
  "Scaleway",
  "SeaweedFS",
  "StackPath",
  "Storj",
  "TencentCOS",
  "Wasabi",
  "Qiniu",
  "Other",
] as const;

/**
 * Providers for which rclone ignores `force_path_style` and always uses
 * virtual-hosted-style addressing (rclone's per-provider "quirks"). Copying that
 * keeps Kura and an exported rclone remote talking to the bucket the same way.
 */
const VIRTUAL_HOST_PROVIDERS = new Set([
  "AWS",
  "Alibaba",
  "DigitalOcean",
  "Dreamhost",
  "HuaweiOBS",
  "IONOS",
  "LyveCloud",
  "Netease",
  "RackCorp",
  "Scaleway",
  "Storj",
  "TencentCOS",
  "Wasabi",
]);

export const s3DriverOptions: readonly DriverOptionSpec[] = [
  { key: "path", type: "text", required: true, sensitive: false },
  { key: "provider", type: "select", required: true, sensitive: false, options: [...S3_PROVIDERS], default: "Other" },
  { key: "env_auth", type: "bool", required: false, sensitive: false, default: "false" },
  { key: "access_key_id", type: "text", required: false, sensitive: true },
  { key: "secret_access_key", type: "password", required: false, sensitive: true },
  { key: "session_token", type: "password", required: false, sensitive: true },
  { key: "region", type: "text", required: false, sensitive: false },
  { key: "endpoint", type: "text", required: false, sensitive: false },
  { key: "location_constraint", type: "text", required: false, sensitive: false },
  {
    key: "acl",
    type: "select",
    required: false,
    sensitive: false,
    options: ["private", "public-read", "public-read-write", "authenticated-read", "bucket-owner-read", "bucket-owner-full-control"],
  },
  { key: "storage_class", type: "text", required: false, sensitive: false },
  { key: "force_path_style", type: "bool", required: false, sensitive: false, default: "true" },
  { key: "list_chunk", type: "int", required: false, sensitive: false, default: "1000" },
];

export interface S3Settings {
  provider: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  region: string;
  /** Scheme + host[:port], no trailing slash. */
  origin: string;
  /** Path part of the endpoint ("" or "/s3"), for S3 APIs mounted under a path. */
  basePath: string;
  bucket: string;
  /** Object key prefix inside the bucket, "" or ending without '/'. */
  prefix: string;
  pathStyle: boolean;
  locationConstraint: string;
  acl: string;
  storageClass: string;
  /** Keys per ListObjects page (rclone's `list_chunk`). */
  listChunk: number;
}

export function resolveS3Settings(config: Record<string, string>): S3Settings {
  const provider = (config.provider ?? "").trim() || "Other";
  if (!(S3_PROVIDERS as readonly string[]).includes(provider))
    throw new Error("S3 provider 无效（须为 rclone 的 provider 名称之一，如 AWS、Cloudflare、Minio、Other）");

  const { bucket, prefix } = splitPath(config.path ?? "");
  const region = (config.region ?? "").trim() || (provider === "Cloudflare" ? "auto" : "us-east-1");
  const endpoint = resolveEndpoint(provider, (config.endpoint ?? "").trim(), region);
  const accessKeyId = (config.access_key_id ?? "").trim();
  const secretAccessKey = config.secret_access_key ?? "";
  if ((accessKeyId === "") !== (secretAccessKey === "")) {
    throw new Error("S3 的 access_key_id 和 secret_access_key 需同时填写");
  }
  if (accessKeyId === "") throw new Error("S3 缺少 access_key_id / secret_access_key (不支持匿名或 env_auth)");

  const forcePathStyle = parseBool(config.force_path_style, true, "S3 force_path_style");
  const pathStyle = !VIRTUAL_HOST_PROVIDERS.has(provider) ? forcePathStyle : !canUseVirtualHost(bucket, endpoint);
  // Virtual-hosted style puts the bucket in the host name, which an IP address cannot take.
  if (!pathStyle && isAddressHost(endpoint)) {
    throw new Error("S3 endpoint 是 IP 地址或 localhost 时只能用路径风格访问：请开启 force_path_style（路径风格访问）");
  }
  return {
    provider,
    accessKeyId,
    secretAccessKey,
    sessionToken: config.session_token ?? "",
    region,
    origin: endpoint.origin,
    basePath: endpoint.pathname.replace(/\/+$/, ""),
    bucket,
    prefix,
    pathStyle,
    locationConstraint: (config.location_constraint ?? "").trim(),
    acl: (config.acl ?? "").trim(),
    storageClass: (config.storage_class ?? "").trim(),
    listChunk: parseListChunk(config.list_chunk),
  };
}

function parseListChunk(value: string | undefined): number {
  if (value === undefined || value.trim() === "") return 1000;
  const n = Number(value.trim());
  if (!Number.isSafeInteger(n) || n < 1 || n > 1000) throw new Error("S3 list_chunk 必须是 1 到 1000 之间的整数");
  return n;
}

/** rclone's remote path `bucket` or `bucket/some/prefix`. */
function splitPath(raw: string): { bucket: string; prefix: string } {
  const trimmed = raw.trim().replace(/^\/+|\/+$/g, "");
  if (trimmed === "") throw new Error("S3 缺少 path 配置 (存储桶名称)");
  const slash = trimmed.indexOf("/");
  const bucket = slash < 0 ? trimmed : trimmed.slice(0, slash);
  const prefix = slash < 0 ? "" : trimmed.slice(slash + 1).replace(/\/{2,}/g, "/");
  if (!/^[A-Za-z0-9._-]{1,255}$/.test(bucket)) throw new Error("S3 存储桶名称无效（只能包含字母、数字、点、下划线和连字符，1-255 个字符）");
  if (prefix.split("/").some((s) => s === "." || s === "..")) throw new Error("S3 path 前缀无效（不能包含 . 或 .. 路径段）");
  return { bucket, prefix };
}

function resolveEndpoint(provider: string, endpoint: string, region: string): URL {
  let text = endpoint;
  if (text === "") {
    if (provider !== "AWS") throw new Error("S3 需要填写 endpoint（只有 provider 为 AWS 时可以省略）");
    text = region.startsWith("cn-") ? `s3.${region}.amazonaws.com.cn` : `s3.${region}.amazonaws.com`;
  }
  // rclone accepts a bare host name and assumes https.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) text = `https://${text}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error("S3 endpoint 无效（不是有效的地址，例如 https://s3.example.com）");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("S3 endpoint 只支持 http/https");
  if (url.username || url.password) throw new Error("S3 endpoint 中不能包含用户名或密码");
  if (url.search || url.hash) throw new Error("S3 endpoint 不能包含查询参数或 # 片段");
  return url;
}

/** Like the AWS SDKs: fall back to path style when the bucket cannot be a DNS label or the host is an IP. */
function canUseVirtualHost(bucket: string, endpoint: URL): boolean {
  if (!/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(bucket)) return false;
  return !isAddressHost(endpoint);
}

/** An IP address (v4 or v6) or localhost: no bucket can be put in front of it as a subdomain. */
function isAddressHost(endpoint: URL): boolean {
  const host = endpoint.hostname;
  return host === "localhost" || /^[\d.]+$/.test(host) || host.startsWith("[");
}
