// Chinese display names for the identifiers the API returns (the server sends structure only).

export const ALERT_KINDS: Record<string, string> = {
  channel_unhealthy: "渠道不健康",
  replication_failed: "复制失败",
  channel_quota_exceeded: "渠道用量超限",
  drain_failed: "清空失败",
  backup_failed: "备份失败",
};

export const TEMPLATE_NAMES: Record<string, string> = {
  local: "本地磁盘",
  aws_s3: "Amazon S3",
  cloudflare_r2: "Cloudflare R2",
  backblaze_b2: "Backblaze B2",
  minio: "MinIO",
  aliyun_oss: "阿里云 OSS",
  tencent_cos: "腾讯云 COS",
  qiniu: "七牛云 Kodo",
  wasabi: "Wasabi",
  s3_other: "其他 S3 兼容存储",
  nextcloud: "Nextcloud",
  owncloud: "ownCloud",
  webdav: "WebDAV",
  sftp: "SFTP",
  onedrive: "OneDrive",
  drive: "Google Drive",
  dropbox: "Dropbox",
};

export const CATEGORY_NAMES: Record<string, string> = {
  local: "本机",
  object_storage: "对象存储",
  webdav: "WebDAV",
  sftp: "SFTP",
  cloud_drive: "网盘（需授权）",
};

export const FIELD_LABELS: Record<string, [string, string?]> = {
  path: ["路径", "本地目录，或“存储桶/前缀”"],
  public_base_url: ["公开访问地址（public_base_url）", "开启直链时，图片 302 到此地址 + 对象路径；留空则不能直链"],
  region: ["区域", "如 us-east-1、cn-hangzhou、ap-guangzhou"],
  access_key_id: ["Access Key ID"],
  secret_access_key: ["Secret Access Key"],
  acl: ["对象 ACL"],
  account_id: ["账户 ID（Account ID）"],
  endpoint: ["端点（Endpoint）", "如 https://minio.example.com"],
  force_path_style: ["路径风格访问（path style）"],
  url: ["WebDAV 地址"],
  user: ["用户名"],
  pass: ["密码"],
  bearer_token: ["Bearer 令牌"],
  host: ["主机"],
  port: ["端口", "默认 22"],
  key_pem: ["私钥（PEM）"],
  key_file_pass: ["私钥口令"],
  known_hosts_file: ["known_hosts 文件路径"],
  host_key_sha256: ["主机密钥指纹", "首次连接时自动记录，可与 ssh-keygen -lf 的输出核对；服务器确实更换密钥后清空并保存以重新记录"],
  client_id: ["应用 Client ID", "留空使用 rclone 内置应用"],
  client_secret: ["应用 Client Secret"],
  token: ["授权令牌", "点“授权”自动获取，也可粘贴 rclone 的令牌 JSON"],
  drive_id: ["Drive ID", "留空时创建渠道会自动获取"],
  drive_type: ["Drive 类型"],
  scope: ["授权范围"],
  root_folder_id: ["根文件夹 ID"],
  auth_url: ["授权地址（高级）"],
  token_url: ["令牌地址（高级）"],
};

export function fieldLabel(key: string): [string, string | undefined] {
  const [label, hint] = FIELD_LABELS[key] ?? [key];
  return [label, hint];
}
