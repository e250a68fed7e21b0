/**
 * Channel templates: short forms for common backends whose inputs expand into a
 * backend config keyed exactly like rclone's options (so a template channel
 * exports as a working rclone remote). Only structure is public; display names
 * and labels belong to the client (spec 2.7).
 */
import { parseBool } from "./drivers/option-spec";
import { ONEDRIVE_DRIVE_TYPES } from "./drivers/onedrive/config";
import { DRIVE_SCOPES, ONEDRIVE_REGIONS } from "./oauth/providers";
import { obscure } from "./rclone/obscure";

export type FieldType = "text" | "password" | "bool" | "select" | "int";

export interface TemplateField {
  key: string;
  type: FieldType;
  required: boolean;
  options?: readonly string[];
  /** Masked with the sentinel when read back (never sent to the client). */
  sensitive?: boolean;
}

export interface ChannelTemplate {
  id: string;
  driver: string;
  category: "local" | "object_storage" | "webdav" | "sftp" | "cloud_drive";
  requiresOauth: boolean;
  fields: readonly TemplateField[];
  /** Inputs (already checked against `fields`) → backend config. */
  build(inputs: Record<string, string>): Record<string, string>;
}

/** Invalid template inputs; the message is safe to show (it names keys, never values of secrets). */
export class TemplateInputError extends Error {}

const ACCESS_KEY: TemplateField = { key: "access_key_id", type: "text", required: true, sensitive: true };
const SECRET_KEY: TemplateField = { key: "secret_access_key", type: "password", required: true, sensitive: true };
const BUCKET: TemplateField = { key: "path", type: "text", required: true };
const PUBLIC_BASE: TemplateField = { key: "public_base_url", type: "text", required: false };
const OPTIONAL_PATH: TemplateField = { key: "path", type: "text", required: false };
const REGION: TemplateField = { key: "region", type: "text", required: true };
const ACL: TemplateField = {
  key: "acl",
  type: "select",
  required: false,
  options: ["private", "public-read", "public-read-write", "authenticated-read", "bucket-owner-read", "bucket-owner-full-control"],
};

/** Region ids go into host names: only the characters real region ids use. */
const REGION_ID = /^[a-z0-9]+(-[a-z0-9]+)*$/;

function region(inputs: Record<string, string>): string {
  const value = inputs.region!.trim().toLowerCase();
  if (!REGION_ID.test(value) || value.length > 64) throw new TemplateInputError("region 格式无效");
  return value;
}

/** The parts every S3 template shares: credentials, bucket/prefix, optional ACL and public address. */
function s3Common(inputs: Record<string, string>, provider: string): Record<string, string> {
  return pick({ provider, access_key_id: inputs.access_key_id?.trim(), secret_access_key: inputs.secret_access_key, acl: inputs.acl }, inputs);
}

/** Adds path/public_base_url and drops empty values. */
function pick(config: Record<string, string | undefined>, inputs: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...config, path: inputs.path, public_base_url: inputs.public_base_url })) {
    if (v !== undefined && v.trim() !== "") out[k] = v;
  }
  return out;
}

/** An S3 template whose endpoint is derived from the region. */
function regionalS3(id: string, provider: string, endpoint: (region: string) => string, sendRegion: boolean): ChannelTemplate {
  return {
    id,
    driver: "s3",
    category: "object_storage",
    requiresOauth: false,
    fields: [REGION, ACCESS_KEY, SECRET_KEY, BUCKET, ACL, PUBLIC_BASE],
    build(inputs) {
      const r = region(inputs);
      return { ...s3Common(inputs, provider), endpoint: endpoint(r), ...(sendRegion ? { region: r } : {}) };
    },
  };
}

/** An S3 template where the user gives the endpoint (self-hosted or any compatible service). */
function endpointS3(id: string, provider: string): ChannelTemplate {
  return {
    id,
    driver: "s3",
    category: "object_storage",
    requiresOauth: false,
    fields: [
      { key: "endpoint", type: "text", required: true },
      { key: "region", type: "text", required: false },
      ACCESS_KEY,
      SECRET_KEY,
      BUCKET,
      { key: "force_path_style", type: "bool", required: false },
      ACL,
      PUBLIC_BASE,
    ],
    build(inputs) {
      const config = { ...s3Common(inputs, provider), endpoint: inputs.endpoint!.trim() };
      if (inputs.region?.trim()) Object.assign(config, { region: region(inputs) });
      if (inputs.force_path_style?.trim()) Object.assign(config, { force_path_style: String(parseBool(inputs.force_path_style, true)) });
      return config;
    },
  };
}

function webdav(id: string, vendor: string): ChannelTemplate {
  return {
    id,
    driver: "webdav",
    category: "webdav",
    requiresOauth: false,
    fields: [
      { key: "url", type: "text", required: true },
      // rclone declares the account name sensitive (spec 4.7 rule 5: masked, audited as set/empty).
      { key: "user", type: "text", required: false, sensitive: true },
      { key: "pass", type: "password", required: false, sensitive: true },
      ...(vendor === "other" ? [{ key: "bearer_token", type: "password", required: false, sensitive: true } as const] : []),
      OPTIONAL_PATH,
      PUBLIC_BASE,
    ],
    build(inputs) {
      // The form takes the plain password; the config keeps rclone's obscured form, as `rclone config` does.
      const pass = inputs.pass ? obscure(inputs.pass) : undefined;
      return pick({ url: inputs.url?.trim(), vendor, user: inputs.user, pass, bearer_token: inputs.bearer_token }, inputs);
    },
  };
}

const OAUTH_APP: readonly TemplateField[] = [
  { key: "client_id", type: "text", required: false, sensitive: true },
  { key: "client_secret", type: "password", required: false, sensitive: true },
  { key: "token", type: "password", required: true, sensitive: true },
];

/** rclone's advanced OAuth endpoint options; empty means the provider's real endpoints. */
const OAUTH_ENDPOINTS: readonly TemplateField[] = [
  { key: "auth_url", type: "text", required: false },
  { key: "token_url", type: "text", required: false },
];

/** Inputs are rclone option names already (the token is rclone's JSON), so they pass through unchanged. */
function oauth(id: string, extra: readonly TemplateField[]): ChannelTemplate {
  return {
    id,
    driver: id,
    category: "cloud_drive",
    requiresOauth: true,
    fields: [...OAUTH_APP, ...extra, ...OAUTH_ENDPOINTS, OPTIONAL_PATH, PUBLIC_BASE],
    build: (inputs) => pick(Object.fromEntries(Object.entries(inputs).filter(([k]) => k !== "path" && k !== "public_base_url")), inputs),
  };
}

export const TEMPLATES: readonly ChannelTemplate[] = [
  {
    id: "local",
    driver: "local",
    category: "local",
    requiresOauth: false,
    fields: [{ key: "path", type: "text", required: true }, PUBLIC_BASE],
    build: (inputs) => pick({}, inputs),
  },
  regionalS3("aws_s3", "AWS", (r) => (r.startsWith("cn-") ? `https://s3.${r}.amazonaws.com.cn` : `https://s3.${r}.amazonaws.com`), true),
  {
    id: "cloudflare_r2",
    driver: "s3",
    category: "object_storage",
    requiresOauth: false,
    fields: [{ key: "account_id", type: "text", required: true }, ACCESS_KEY, SECRET_KEY, BUCKET, PUBLIC_BASE],
    build(inputs) {
      const account = inputs.account_id!.trim().toLowerCase();
      if (!/^[a-z0-9]{1,64}$/.test(account)) throw new TemplateInputError("account_id 格式无效");
      return { ...s3Common(inputs, "Cloudflare"), endpoint: `https://${account}.r2.cloudflarestorage.com`, region: "auto" };
    },
  },
  // rclone 1.60 has no Backblaze provider; B2's S3 API works as provider Other.
  regionalS3("backblaze_b2", "Other", (r) => `https://s3.${r}.backblazeb2.com`, true),
  endpointS3("minio", "Minio"),
  regionalS3("aliyun_oss", "Alibaba", (r) => `https://oss-${r}.aliyuncs.com`, false),
  regionalS3("tencent_cos", "TencentCOS", (r) => `https://cos.${r}.myqcloud.com`, false),
  regionalS3("qiniu", "Qiniu", (r) => `https://s3-${r}.qiniucs.com`, true),
  regionalS3("wasabi", "Wasabi", (r) => `https://s3.${r}.wasabisys.com`, true),
  endpointS3("s3_other", "Other"),
  webdav("nextcloud", "nextcloud"),
  webdav("owncloud", "owncloud"),
  webdav("webdav", "other"),
  {
    id: "sftp",
    driver: "sftp",
    category: "sftp",
    requiresOauth: false,
    fields: [
      // Host and account name: sensitive in rclone's sftp backend, so masked here too.
      { key: "host", type: "text", required: true, sensitive: true },
      { key: "port", type: "int", required: false },
      { key: "user", type: "text", required: false, sensitive: true },
      { key: "pass", type: "password", required: false, sensitive: true },
      { key: "key_pem", type: "password", required: false, sensitive: true },
      { key: "key_file_pass", type: "password", required: false, sensitive: true },
      { key: "known_hosts_file", type: "text", required: false },
      // Filled in by the first successful probe when known_hosts_file is empty; cleared to re-pin.
      { key: "host_key_sha256", type: "text", required: false },
      OPTIONAL_PATH,
      PUBLIC_BASE,
    ],
    build(inputs) {
      const obscured = (v: string | undefined) => (v ? obscure(v) : undefined);
      return pick(
        {
          host: inputs.host?.trim(),
          port: inputs.port,
          user: inputs.user,
          pass: obscured(inputs.pass),
          key_pem: inputs.key_pem,
          key_file_pass: obscured(inputs.key_file_pass),
          known_hosts_file: inputs.known_hosts_file,
          host_key_sha256: inputs.host_key_sha256,
        },
        inputs,
      );
    },
  },
  // drive_id / drive_type and root_folder_id may stay empty: creation fills them in from the provider (spec 4.7 rule 2).
  oauth("onedrive", [
    { key: "region", type: "select", required: false, options: ONEDRIVE_REGIONS },
    { key: "drive_id", type: "text", required: false, sensitive: true },
    { key: "drive_type", type: "select", required: false, options: ONEDRIVE_DRIVE_TYPES },
  ]),
  oauth("drive", [
    { key: "scope", type: "select", required: false, options: DRIVE_SCOPES },
    { key: "root_folder_id", type: "text", required: false, sensitive: true },
  ]),
  oauth("dropbox", []),
];

export function findTemplate(id: string): ChannelTemplate | undefined {
  return TEMPLATES.find((t) => t.id === id);
}

/** The public structure (GET /api/admin/channel-templates). */
export function templateItems() {
  return TEMPLATES.map((t) => ({
    id: t.id,
    driver: t.driver,
    category: t.category,
    requires_oauth: t.requiresOauth,
    fields: t.fields.map((f) => ({ key: f.key, type: f.type, required: f.required, options: [...(f.options ?? [])] })),
  }));
}

export function isSensitiveInput(template: ChannelTemplate, key: string): boolean {
  return !!template.fields.find((f) => f.key === key)?.sensitive;
}

/** Checks inputs against the template's fields (unknown keys, required, types), then expands them. */
export function buildTemplateConfig(template: ChannelTemplate, inputs: Record<string, string>): Record<string, string> {
  const fields = new Map(template.fields.map((f) => [f.key, f]));
  for (const key of Object.keys(inputs)) {
    if (!fields.has(key)) throw new TemplateInputError(`模板 ${template.id} 不支持字段 ${key}`);
  }
  for (const field of template.fields) {
    const value = inputs[field.key] ?? "";
    if (value.trim() === "") {
      if (field.required) throw new TemplateInputError(`缺少必填字段 ${field.key}`);
      continue;
    }
    if (field.type === "select" && !field.options!.includes(value)) throw new TemplateInputError(`字段 ${field.key} 的取值无效`);
    if (field.type === "int" && !/^\d{1,9}$/.test(value.trim())) throw new TemplateInputError(`字段 ${field.key} 必须是非负整数`);
    if (field.type === "bool") {
      try {
        parseBool(value, false);
      } catch {
        throw new TemplateInputError(`字段 ${field.key} 必须是布尔值`);
      }
    }
  }
  return template.build(inputs);
}
