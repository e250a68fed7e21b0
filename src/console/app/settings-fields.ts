// Every runtime setting (openapi.yaml components/schemas/Settings), grouped as people look
// for them, with the unit each number is in.
import type { Settings } from "./types";

export type SettingKind = "text" | "secret" | "int" | "bool" | "widths" | { options: [string, string][] } | { multi: string[] };

export interface SettingSpec {
  key: keyof Settings & string;
  label: string;
  unit?: string;
  hint?: string;
  kind: SettingKind;
  /** Integers: the server's accepted range (src/config/settings-schema.ts; test/contract/console-settings.test.ts compares them). */
  min?: number;
  max?: number;
}

export interface SettingGroup {
  id: string;
  title: string;
  fields: SettingSpec[];
}

/** Durations are capped at 100 years in their own unit, as the server's schema does. */
const CAP = { ms: 3_153_600_000_000, seconds: 3_153_600_000, minutes: 52_560_000, hours: 876_000, days: 36_500 } as const;

const int = (key: SettingSpec["key"], label: string, range: [number, number], unit?: string, hint?: string): SettingSpec => ({
  key,
  label,
  unit,
  hint,
  kind: "int",
  min: range[0],
  max: range[1],
});
const r = (min: number, max: number): [number, number] => [min, max];
const dur = (unit: keyof typeof CAP, min = 0): [number, number] => [min, CAP[unit]];
const bool = (key: SettingSpec["key"], label: string, hint?: string): SettingSpec => ({ key, label, hint, kind: "bool" });

export const SETTING_GROUPS: SettingGroup[] = [
  {
    id: "uploads",
    title: "上传",
    fields: [
      int("max_upload_mb", "单张大小上限", r(1, 10_240), "MB", "超过时上传返回 413"),
      int("max_pixels_mp", "单张像素上限", r(1, 1_000), "百万像素", "超过时返回 422"),
      int("max_concurrent_uploads", "同时处理的上传数", r(1, 10_000), "个", "超出时返回 429"),
      int("upload_rate_per_min", "每用户上传频率上限", r(1, 1_000_000), "次/分钟"),
      int(
        "upload_idle_timeout_seconds",
        "上传停顿上限",
        dur("seconds", 1),
        "秒",
        "上传数据持续这么久收不到任何字节即以 408 结束；只看停顿，慢速但持续的上传不受影响",
      ),
      {
        key: "exif_policy",
        label: "EXIF 策略",
        hint: "去除会删掉 GPS 等隐私信息并保持显示方向",
        kind: {
          options: [
            ["strip", "去除 EXIF/GPS"],
            ["passthrough", "原样保留"],
          ],
        },
      },
      int("default_ttl_hours", "默认有效期", dur("hours"), "小时", "0 表示永久"),
      int("idempotency_key_ttl_hours", "幂等键保留时长", dur("hours", 1), "小时"),
      int("s3_multipart_expiry_hours", "S3 分片上传保留时长", dur("hours", 1), "小时", "S3 分片上传开始后超过这么久仍未完成，即中止并删除已上传的分片"),
    ],
  },
  {
    id: "delivery",
    title: "分发与图片处理",
    fields: [
      { key: "base_url", label: "站点地址", hint: "公开访问地址，如 https://img.example.com（结尾的 / 会去掉）；留空则按请求推断", kind: "text" },
      {
        key: "access_mode",
        label: "原图访问方式",
        hint: "redirect 会把原图 302 到允许直链的渠道",
        kind: {
          options: [
            ["proxy", "代理（proxy）"],
            ["redirect", "重定向（redirect）"],
          ],
        },
      },
      { key: "process_widths", label: "允许的缩放宽度", unit: "像素", hint: "逗号分隔，如 320, 640, 1280；留空表示不缩放", kind: "widths" },
      { key: "process_formats", label: "允许的输出格式", kind: { multi: ["webp", "jpeg", "png", "avif", "gif"] } },
      int("process_quality_webp", "WebP 质量", r(1, 100)),
      int("process_quality_jpeg", "JPEG 质量", r(1, 100)),
      int("process_webp_method", "WebP 压缩力度", r(0, 6), undefined, "越大越慢、文件越小"),
      int("process_workers", "图片处理线程", r(1, 64), "个"),
      int("process_timeout_ms", "单次处理超时", dur("ms", 100), "毫秒", "也是排队等待处理线程的上限；超时则返回原图（不缓存）"),
      int("variants_cache_mb", "变体缓存上限", r(0, 10_485_760), "MB", "0 表示不缓存"),
      bool("allow_empty_referer", "允许空 Referer", "防盗链开启时放行不带 Referer 的请求"),
    ],
  },
  {
    id: "storage",
    title: "存储与复制",
    fields: [
      int("min_success", "同步写入成功的最少渠道数", r(1, 100), "个"),
      int("health_check_seconds", "渠道健康检查间隔", dur("seconds", 1), "秒"),
      int("channel_quota_gb", "单渠道用量告警阈值", r(0, 1_000_000_000), "GB", "0 表示不告警"),
      int("usage_report_seconds", "用量统计间隔", dur("seconds", 1), "秒"),
      bool("encrypt_new_channels", "新渠道默认加密"),
    ],
  },
  {
    id: "lifecycle",
    title: "生命周期与审核",
    fields: [
      bool("ttl_renew_on_access", "访问时续期", "有有效期的图片被访问时重新计时"),
      int("cleanup_sweep_seconds", "过期清理间隔", dur("seconds", 1), "秒"),
      int("delete_grace_minutes", "删除宽限期", dur("minutes"), "分钟", "引用归零后经过这段时间才物理删除；修改后，尚未执行的删除也按新值重新计时"),
      int("cold_cleanup_days", "冷图判定", dur("days"), "天", "超过这么久未被访问进入待清理列表；0 表示关闭"),
      int("activity_flush_seconds", "访问统计写入间隔", dur("seconds", 1), "秒"),
      int("dedup_scan_seconds", "相似图片扫描间隔", dur("seconds", 1), "秒"),
      int(
        "dedup_phash_max_distance",
        "相似判定阈值",
        r(0, 64),
        "位",
        "感知哈希的汉明距离，越小越严格；调大后会在后台重新扫描已有图片，调小时已列出的候选保留；每张图片最多与此前扫描过的最接近的 20 张组成候选",
      ),
    ],
  },
  {
    id: "backups",
    title: "备份",
    fields: [int("backup_interval_hours", "自动快照间隔", dur("hours", 1), "小时"), int("backup_keep", "每个渠道保留快照", r(1, 10_000), "份")],
  },
  {
    id: "alerts",
    title: "告警与 CDN",
    fields: [
      { key: "alert_webhook_url", label: "告警 Webhook", hint: "告警产生和解除时 POST JSON 到此地址；留空关闭", kind: "text" },
      {
        key: "cdn_provider_zone_id",
        label: "CDN Zone ID",
        hint: "Cloudflare 的 Zone ID。与 CDN API 令牌、站点地址都设置后，删除图片时才会清除 CDN 缓存",
        kind: "text",
      },
      { key: "cdn_provider_api_token", label: "CDN API 令牌", hint: "已设置时显示为空；留空保持不变，勾选“清除”删除", kind: "secret" },
    ],
  },
  {
    id: "security",
    title: "安全",
    fields: [int("audit_retention_days", "审计日志保留", dur("days", 1), "天")],
  },
];
