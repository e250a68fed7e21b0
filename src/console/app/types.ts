// Shapes of the /api/admin JSON the console reads (see openapi.yaml, components/schemas).

export type Timestamp = string; // UTC "YYYY-MM-DD HH:MM:SS"

export interface Principal {
  user: { id: string; name: string; role: "admin" | "user"; must_change_password: boolean };
  csrf_token: string;
}

export interface ConfigSlice {
  process_widths: number[] | null;
  default_ttl_hours: number;
  max_upload_mb: number;
  base_url: string;
  access_mode: string;
  exif_policy: string;
  build: { version: string; commit: string; built_at: string };
}

export interface Settings {
  base_url: string;
  max_upload_mb: number;
  exif_policy: "strip" | "passthrough";
  access_mode: "proxy" | "redirect";
  process_widths: number[] | null;
  default_ttl_hours: number;
  allow_empty_referer: boolean;
  [key: string]: unknown;
}

export interface FullConfig {
  bootstrap: { listen: string; data_dir: string; trusted_proxies: string; metrics_allow: string };
  settings: Settings;
  derived: Record<string, unknown>;
}

export interface Replica {
  channel_id: number;
  channel_name: string;
  state: string;
  attempts: number;
  last_error: string;
  updated_at: Timestamp;
}

export interface Image {
  id: string;
  url: string;
  user_id: string;
  token_id: number | null;
  token_name: string | null;
  file_name: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  sha256: string;
  expire_at: Timestamp | null;
  ttl_seconds: number | null;
  last_access_at: Timestamp | null;
  access_count: number;
  pending_cleanup: boolean;
  cleanup_exempt: boolean;
  created_at: Timestamp;
  ref_count: number;
  replicas?: Replica[];
}

export interface Page<T> {
  items: T[];
  total: number;
}

export interface UploadResult {
  id: string;
  url: string;
}

export interface Token {
  id: number;
  name: string;
  prefix: string;
  scopes: string;
  expires_at: Timestamp | null;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
  created_at: Timestamp;
}

export interface TokenIssued {
  id: number;
  name: string;
  prefix: string;
  token: string;
}

export interface S3Credential {
  access_key_id: string;
  secret_access_key: string;
  endpoint: string;
  region: string;
  bucket: string;
  url_prefix: string;
}

export interface User {
  id: string;
  name: string;
  role: "admin" | "user";
  quota_bytes: number | null;
  default_ttl_hours: number | null;
  disabled: boolean;
  created_at: Timestamp;
  used_bytes: number;
  image_count: number;
}

export interface Channel {
  id: number;
  name: string;
  driver: string;
  priority: number;
  healthy: boolean;
  encrypted: boolean;
  allow_direct_link: boolean;
  last_checked_at: string;
  last_error: string;
  deleting: boolean;
  replicas: { done: number; pending: number; failed: number };
  created_at: Timestamp;
}

export interface RefererRule {
  id: number;
  pattern: string;
  created_at: Timestamp;
}

/** What every view gets from the shell. */
export interface ViewContext {
  me: Principal;
  config: ConfigSlice;
  /** Public site origin: base_url when set, else this page's origin. */
  origin: string;
}
