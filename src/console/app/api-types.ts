// GENERATED from openapi.yaml by scripts/gen-console-types.ts — do not edit by hand.
// Run `bun run scripts/gen-console-types.ts` after changing components/schemas.

export interface Error {
  /** 中文错误说明 */
  error: string;
}

export type Timestamp = string;

export interface OwnSession {
  /** 会话编号（由会话派生，不能用来登录） */
  id: string;
  /** 登录时间 */
  created_at: Timestamp;
  /** 到期时间（登录后 30 天，不因使用延长） */
  expires_at: Timestamp;
  /** 登录时的客户端地址 */
  client: string;
  /** 登录时浏览器的 User-Agent */
  user_agent: string;
  /** 是否为本次请求所用的会话 */
  current: boolean;
}

export interface Principal {
  user: {
    id: string;
    name: string;
    role: "admin" | "user";
    must_change_password: boolean;
  };
  csrf_token: string;
}

export interface User {
  id: string;
  name: string;
  role: "admin" | "user";
  /** 配额字节数，null 表示不限 */
  quota_bytes: number | null;
  /** 上传默认有效期（小时），null 跟随全局，0 为永久 */
  default_ttl_hours: number | null;
  disabled: boolean;
  created_at: Timestamp;
  used_bytes: number;
  image_count: number;
}

export interface UserList {
  items: User[];
  total: number;
}

export interface Build {
  version: string;
  commit: string;
  built_at: string;
}

export interface ConfigSlice {
  cold_cleanup_days: number;
  delete_grace_minutes: number;
  process_widths: number[] | null;
  default_ttl_hours: number;
  ttl_renew_on_access: boolean;
  max_upload_mb: number;
  base_url: string;
  access_mode: "proxy" | "redirect";
  exif_policy: "passthrough" | "strip";
  encrypt_new_channels: boolean;
  build: Build;
}

/** 运行时配置项（全部键）。`cdn_provider_api_token` 读取时恒为空字符串。 */
export interface Settings {
  max_upload_mb?: number;
  max_pixels_mp?: number;
  max_concurrent_uploads?: number;
  upload_rate_per_min?: number;
  /** 上传请求体持续多少秒收不到任何数据即以 408 结束，已收到的内容删除；只看停顿，不限总时长，慢速但持续的上传不受影响；S3 接口（PutObject、UploadPart、POST Object）同样适用，返回 400 `RequestTimeout` */
  upload_idle_timeout_seconds?: number;
  base_url?: string;
  cdn_provider_zone_id?: string;
  cdn_provider_api_token?: string;
  alert_webhook_url?: string;
  allow_empty_referer?: boolean;
  ttl_renew_on_access?: boolean;
  encrypt_new_channels?: boolean;
  exif_policy?: "passthrough" | "strip";
  access_mode?: "proxy" | "redirect";
  min_success?: number;
  health_check_seconds?: number;
  backup_interval_hours?: number;
  backup_keep?: number;
  cleanup_sweep_seconds?: number;
  delete_grace_minutes?: number;
  default_ttl_hours?: number;
  activity_flush_seconds?: number;
  cold_cleanup_days?: number;
  usage_report_seconds?: number;
  channel_quota_gb?: number;
  dedup_scan_seconds?: number;
  dedup_phash_max_distance?: number;
  process_widths?: number[] | null;
  process_formats?: ("webp" | "jpeg" | "png" | "avif" | "gif")[];
  process_quality_webp?: number;
  process_quality_jpeg?: number;
  process_webp_method?: number;
  process_workers?: number;
  /** 单个变体的处理超时，也是排队等待处理线程的上限；超时则返回原图（Cache-Control no-store） */
  process_timeout_ms?: number;
  variants_cache_mb?: number;
  idempotency_key_ttl_hours?: number;
  /** 未完成的 S3 分片上传在创建多少小时后由清理扫描删除 */
  s3_multipart_expiry_hours?: number;
  audit_retention_days?: number;
}

export interface FullConfig {
  bootstrap: {
    listen: string;
    data_dir: string;
    trusted_proxies: string;
    metrics_allow: string;
  };
  settings: Settings & Required<Pick<Settings, "max_upload_mb" | "base_url" | "cdn_provider_api_token" | "process_widths" | "process_formats">>;
  derived: {
    cdn_purge_enabled: boolean;
    cdn_api_token_set: boolean;
    login_burst: number;
    login_refill_seconds: number;
    reconcile_interval_seconds: number;
  };
}

export type NullableTimestamp = string | null;

export interface Token {
  id: number;
  /** 用途名称，同一用户内唯一 */
  name: string;
  /** 明文的识别前缀，也是 S3 access_key_id；不含任何秘密部分 */
  prefix: string;
  /** 权限范围，目前签发的令牌为 `upload` */
  scopes: string;
  /** 过期时间，null 表示永久有效 */
  expires_at: NullableTimestamp;
  /** 最近使用时间（精度约一分钟），null 表示从未使用 */
  last_used_at: NullableTimestamp;
  /** 吊销时间，null 表示未吊销 */
  revoked_at: NullableTimestamp;
  /** 签发时间；轮换后为轮换时间 */
  created_at: Timestamp;
}

export interface TokenList {
  items: Token[];
  total: number;
}

export interface TokenIssued {
  id: number;
  name: string;
  prefix: string;
  /** 令牌明文，仅在签发或轮换时返回这一次；服务端只保存其哈希 */
  token: string;
}

export interface S3Credential {
  /** 等于令牌前缀 */
  access_key_id: string;
  /** 由主密钥按令牌派生，不落库，可重复读取；轮换后改变 */
  secret_access_key: string;
  /** 客户端填写的 S3 端点，以 `/s3` 结尾 */
  endpoint: string;
  /** 占位区域（不区分区域） */
  region: string;
  /** 唯一可用的桶名 `kura`；其他桶名返回 NoSuchBucket */
  bucket: string;
  /** 客户端拼接最终地址的前缀，含用户 ID 段，形如 `<origin>/o/<user_id>/` */
  url_prefix: string;
}

export interface UploadResult {
  /** 图片短 ID */
  id: string;
  /** 图片的绝对访问地址（设置了 base_url 时以其为前缀） */
  url: string;
}

export interface UrlImport {
  /** 仅限 http/https 公网地址 */
  url: string;
  /** 覆盖从 URL 最后一段推断的文件名 */
  file_name?: string;
  exif_policy?: "strip" | "passthrough";
  /** 有效期秒数（0 到 3153600000）、数字字符串或 never */
  ttl?: number | string;
}

export interface Image {
  id: string;
  /** 相对站点根的公开路径 */
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
  expire_at: NullableTimestamp;
  ttl_seconds: number | null;
  last_access_at: NullableTimestamp;
  access_count: number;
  pending_cleanup: boolean;
  cleanup_exempt: boolean;
  created_at: Timestamp;
  /** 引用同一份字节的图片数；管理员看到全部用户的引用，普通用户只计自己的引用 */
  ref_count: number;
  /** 仅详情返回，按渠道优先级降序 */
  replicas?: {
    channel_id: number;
    channel_name: string;
    state: string;
    attempts: number;
    last_error: string;
    updated_at: Timestamp;
  }[];
}

export interface ImageList {
  items: Image[];
  total: number;
  /** 下一页的游标（传给 cursor 参数）；没有更多时为 null */
  next_cursor?: string | null;
}

export interface RefererRule {
  id: number;
  pattern: string;
  created_at: Timestamp;
}

export interface ChannelReplicaCounts {
  /** 已完成的副本数 */
  done: number;
  /** 等待复制的副本数 */
  pending: number;
  /** 复制失败的副本数 */
  failed: number;
}

/** 存储渠道的公开描述，不含配置与凭据 */
export interface Channel {
  id: number;
  /** 唯一名称 */
  name: string;
  /** 存储后端名称（与 rclone 的 type 相同，如 local、s3、webdav、sftp） */
  driver: string;
  /** 越大越优先，默认 0 */
  priority: number;
  healthy: boolean;
  /** 创建时确定，之后不可修改 */
  encrypted: boolean;
  /** 是否允许 302 直链，默认 false */
  allow_direct_link: boolean;
  /** 最近探测时间；空字符串表示从未探测 */
  last_checked_at: string;
  /** 最近一次探测失败的原因；加载失败时以加载失败标记开头；空字符串表示最近一次探测成功 */
  last_error: string;
  /** 正在清空，清空后渠道消失 */
  deleting: boolean;
  replicas: ChannelReplicaCounts;
  created_at: Timestamp;
}

export interface ChannelList {
  items: Channel[];
  total: number;
}

/** 渠道模板，仅含结构；显示名称与标签由客户端提供 */
export interface ChannelTemplate {
  id: string;
  driver: string;
  /** 如 local、object_storage、webdav、sftp、cloud_drive */
  category: string;
  requires_oauth: boolean;
  fields: {
    key: string;
    /** 如 text、password、bool、select、int */
    type: string;
    required: boolean;
    /** select 类型的可选值，其他类型为空数组 */
    options: string[];
  }[];
}

export interface ChannelTemplateList {
  items: ChannelTemplate[];
  total: number;
}

/** 参数名到值的映射；数字和布尔值按字符串保存 */
export type ChannelValueMap = Record<string, string | number | boolean>;

/** 渠道编辑视图；所有密码或敏感参数以 `__kura_secret_keep__` 代替 */
export interface ChannelConfigView {
  /** 模板 id；空字符串表示自定义 */
  template: string;
  driver: string;
  /** 后端参数（rclone 参数名），敏感值已遮蔽 */
  config: Record<string, string>;
  /** 模板表单值，同样遮蔽；仅模板渠道 */
  inputs?: Record<string, string>;
}

/** 配置来源二选一：模板模式（`template` + `inputs`）或自定义模式（`driver` + `config`，`template` 为空或 `custom`）。严格校验，未知字段整体拒绝。 */
export interface ChannelCreate {
  name: string;
  /** 模板 id；空或 `custom` 表示自定义模式 */
  template?: string;
  inputs?: ChannelValueMap;
  /** 后端名称（自定义模式） */
  driver?: string;
  config?: ChannelValueMap;
  priority?: number;
  /** 默认取全局设置 encrypt_new_channels；创建后不可修改 */
  encrypted?: boolean;
  /** 加密渠道不能开启 */
  allow_direct_link?: boolean;
  /** 创建时先创建存储桶（仅 S3，需要相应权限） */
  auto_create_bucket?: boolean;
}

/** 与创建相同，另有 `channel_id`（编辑场景，占位值按该渠道已保存的凭据还原）；`name` 可省略 */
export interface ChannelTest {
  name?: string;
  template?: string;
  inputs?: ChannelValueMap;
  driver?: string;
  config?: ChannelValueMap;
  priority?: number;
  encrypted?: boolean;
  allow_direct_link?: boolean;
  auto_create_bucket?: boolean;
  /** 0 或不填表示新建 */
  channel_id?: number;
}

/** 完整替换。`encrypted` 可以提交但必须等于当前值，否则 409。占位值 `__kura_secret_keep__` 只能用于读取时被遮蔽的参数，表示保留已保存的凭据，用在其他参数上返回 400。 */
export interface ChannelUpdate {
  name: string;
  priority: number;
  allow_direct_link: boolean;
  template?: string;
  inputs?: ChannelValueMap;
  driver?: string;
  config?: ChannelValueMap;
  encrypted?: boolean;
  auto_create_bucket?: boolean;
}

export interface ChannelTestResult {
  ok: boolean;
  /** 失败原因（不含凭据） */
  error?: string;
  /** 刷新后的 OAuth 令牌 JSON（仅当提交的是新令牌时返回） */
  token?: string;
}

export interface Alert {
  id: number;
  kind: "channel_unhealthy" | "replication_failed" | "channel_quota_exceeded" | "drain_failed" | "backup_failed";
  /** 渠道名；backup_failed 为空 */
  target: string;
  message: string;
  opened_at: Timestamp;
  /** 未解除时为空字符串 */
  resolved_at: string;
}

export interface AuditEntry {
  id: number;
  actor: string;
  actor_name: string;
  action: string;
  target: string;
  /** 不含任何凭据值（仅"已设置/已清空"标记） */
  detail: string;
  created_at: Timestamp;
}

export interface TopImage {
  id: string;
  url: string;
  file_name: string;
  access_count: number;
  size: number;
}

export interface AdminDashboard {
  /** 没有健康、非删除中且非本地磁盘的渠道时为 true */
  offsite_missing: boolean;
  images: number;
  storage_bytes: number;
  users: number;
  pending_cleanup: number;
  /** 与 `GET /api/admin/dedup` 列出的候选数一致 */
  pending_dedup: number;
  total_accesses: number;
  /** 粗略估计：访问次数乘以原图字节数 */
  traffic_estimate_bytes: number;
  top_images: TopImage[];
  /** 每个用户的图片数、占用与估算流量，按占用降序 */
  per_user: {
    id: string;
    name: string;
    images: number;
    storage_bytes: number;
    total_accesses: number;
    traffic_estimate_bytes: number;
  }[];
  channels: {
    id: number;
    name: string;
    driver: string;
    healthy: boolean;
    bytes: number;
  }[];
  /** 全部未解除的告警，最新的在前（与不带 status 的 `GET /api/admin/alerts` 相同，第 6.2 节） */
  alerts: Alert[];
}

export interface UserDashboard {
  images: number;
  storage_bytes: number;
  quota_bytes: number | null;
  total_accesses: number;
  traffic_estimate_bytes: number;
  top_images: TopImage[];
}

export interface DedupSide {
  /** 合并时作为 keep_blob_id 使用 */
  blob_id: number;
  /** 引用该文件的一张图片（最早上传的一张），用于预览 */
  image_id: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  /** 引用该文件的图片数 */
  refs: number;
}

export interface DedupCandidate {
  id: number;
  /** 两个感知哈希的汉明距离 */
  distance: number;
  created_at: Timestamp;
  a: DedupSide;
  b: DedupSide;
}

export interface CleanupItem {
  id: string;
  /** cold：超过 cold_cleanup_days 未被公开访问；superseded：其对象键（S3 键）已被之后的上传重新指向，旧图片仍占用空间 */
  reason: "cold" | "superseded";
  /** 相对站点根的公开路径 */
  url: string;
  user_id: string;
  file_name: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  last_access_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface MetadataExport {
  users: User[];
  channels: (Record<string, unknown>)[];
  tokens: {
    id: number;
    user_id: string;
    name: string;
    prefix: string;
    scopes: string;
    /** 空为永久 */
    expires_at: string | null;
    last_used_at: string | null;
    revoked_at: string | null;
    created_at: string;
  }[];
  images: {
    id: string;
    blob_id: number;
    user_id: string;
    token_id: number | null;
    file_name: string;
    object_key: string | null;
    expire_at: string | null;
    ttl_seconds: number | null;
    last_public_access_at: string | null;
    access_count: number;
    pending_cleanup: boolean;
    cleanup_exempt: boolean;
    created_at: string;
  }[];
  blobs: {
    id: number;
    sha256: string;
    phash: string;
    storage_key: string;
    mime: string;
    size: number;
    width: number;
    height: number;
    ref_count: number;
    pending_delete: boolean;
    delete_after: string | null;
    created_at: string;
  }[];
  blob_channels: {
    blob_id: number;
    channel_id: number;
    state: string;
    attempts: number;
    last_error: string;
    updated_at: string;
  }[];
}

export interface BackupSnapshot {
  /** 快照文件名 kura-YYYYMMDD-HHMMSS.mmm.db（UTC） */
  name: string;
  /** 字节数 */
  size: number;
  /** RFC 3339，毫秒精度 */
  taken_at: string;
  /** 持有该快照的健康渠道名，按优先级从高到低 */
  channels: string[];
}

/** Lsky Pro 形状的错误：HTTP 200，令牌无效时 401，频率或并发限制时 429 */
export interface LskyError {
  status: false;
  /** 中文错误说明 */
  message: string;
  data: Record<string, unknown>;
}

export interface LskyLinks {
  /** `/i/{id}.{ext}` 绝对地址 */
  url: string;
  /** Lsky 的形式：再经一次 HTML 转义的标签 `&lt;img src="…" alt="…" title="…" /&gt;`（文件名在属性中先转义） */
  html: string;
  /** `[img]…[/img]` */
  bbcode: string;
  markdown: string;
  markdown_with_link: string;
  /** 缩略图：`?w=` 取 process_widths 中最小的宽度；未开放缩放时为原图地址 */
  thumbnail_url: string;
}

export interface LskyImageFields {
  /** 图片短 ID（删除接口的 key） */
  key: string;
  /** `{id}.{ext}` */
  name: string;
  pathname: string;
  /** 上传时的文件名 */
  origin_name: string;
  /** 大小（KiB） */
  size: number;
  mimetype: string;
  extension: string;
  links: LskyLinks;
}

export type LskyUploaded = LskyImageFields & {
  md5: string;
  sha1: string;
};

export type LskyImageItem = LskyImageFields & {
  /** 上传时保存的 MD5；未知时为 null */
  md5: string | null;
  /** 上传时保存的 SHA-1；未知时为 null */
  sha1: string | null;
  width: number;
  height: number;
  /** 相对时间，如“5 分钟前” */
  human_date: string;
  /** 上传时间，服务进程所在时区的本地时间（TZ 或 /etc/localtime），与 Lsky 一样 */
  date: Timestamp;
  album: null;
};

/** Laravel 分页结构（每页 40 条） */
export interface LskyPage {
  current_page: number;
  data: unknown[];
  first_page_url: string;
  from: number | null;
  last_page: number;
  last_page_url: string;
  links: {
    url: string | null;
    label: string;
    active: boolean;
  }[];
  next_page_url: string | null;
  path: string;
  per_page: number;
  prev_page_url: string | null;
  to: number | null;
  total: number;
}

export interface CheveretoFile {
  filename: string;
  name: string;
  mime: string;
  extension: string;
  url: string;
  size?: number;
}

export interface CheveretoSuccess {
  status_code: 200;
  success: {
    message: string;
    code: 200;
  };
  status_txt: "OK";
  image: CheveretoImage;
}

/** 以 `image` 而非 `source` 提交时（Chevereto V4 的 ImgBB 兼容形式）的成功响应：多出 `status`，图片在 `data` 中并带 `id` */
export interface CheveretoImgbbSuccess {
  status_code: 200;
  status: 200;
  success: {
    message: "file uploaded";
    code: 200;
  };
  status_txt: "OK";
  data: CheveretoImage & {
    /** 图片短 ID（同 id_encoded） */
    id: string;
  };
}

export interface CheveretoImage {
  /** 图片短 ID */
  name: string;
  extension: string;
  /** 字节数 */
  size: number;
  width: number;
  height: number;
  /** 上传时间，服务进程所在时区的本地时间（TZ 或 /etc/localtime） */
  date: Timestamp;
  /** 上传时间（UTC） */
  date_gmt: Timestamp;
  /** 到期自动删除的时间（UTC），永久保存时为 null */
  expiration_date_gmt: Timestamp | null;
  title?: string;
  description?: null;
  nsfw?: number;
  md5: string;
  original_filename: string;
  filename: string;
  id_encoded: string;
  mime: string;
  size_formatted?: string;
  /** `/i/{id}.{ext}` 绝对地址 */
  url: string;
  /** 没有查看页，与 url 相同 */
  url_viewer: string;
  url_short?: string;
  image: CheveretoFile;
  thumb: CheveretoFile;
  medium: CheveretoFile;
  display_url: string;
  views?: number;
  how_long_ago?: string;
}

export interface CheveretoError {
  /** 与 HTTP 状态码相同 */
  status_code: number;
  error: {
    /** 中文错误说明 */
    message: string;
    /** Chevereto 的代码：100 密钥缺失或无效，120 无效的 base64 或操作，130 缺少 source；其余同 status_code */
    code: number;
  };
  status_txt: string;
}
