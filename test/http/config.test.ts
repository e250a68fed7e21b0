import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";

describe("runtime configuration", () => {
  let server: KuraServer;
  let admin: Session;
  beforeAll(async () => {
    server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "10.9.0.0/16", KURA_METRICS_ALLOW: "127.0.0.1" } });
    admin = await adminSession(server);
  });
  afterAll(() => server.dispose());

  test("full view has every documented key, bootstrap and derived values", async () => {
    const full = await admin.json("GET", "/api/admin/config/full");
    expect(full.bootstrap).toEqual({ listen: "127.0.0.1:0", data_dir: server.dataDir, trusted_proxies: "10.9.0.0/16", metrics_allow: "127.0.0.1" });
    const keys = [
      "max_upload_mb",
      "max_pixels_mp",
      "max_concurrent_uploads",
      "upload_rate_per_min",
      "upload_idle_timeout_seconds",
      "base_url",
      "cdn_provider_zone_id",
      "cdn_provider_api_token",
      "alert_webhook_url",
      "allow_empty_referer",
      "ttl_renew_on_access",
      "encrypt_new_channels",
      "exif_policy",
      "access_mode",
      "min_success",
      "health_check_seconds",
      "backup_interval_hours",
      "backup_keep",
      "cleanup_sweep_seconds",
      "delete_grace_minutes",
      "default_ttl_hours",
      "activity_flush_seconds",
      "cold_cleanup_days",
      "usage_report_seconds",
      "channel_quota_gb",
      "dedup_scan_seconds",
      "dedup_phash_max_distance",
      "process_widths",
      "process_formats",
      "process_quality_webp",
      "process_quality_jpeg",
      "process_webp_method",
      "process_workers",
      "process_timeout_ms",
      "variants_cache_mb",
      "idempotency_key_ttl_hours",
      "s3_multipart_expiry_hours",
      "audit_retention_days",
    ];
    expect(Object.keys(full.settings).sort()).toEqual(keys.sort());
    expect(full.derived).toMatchObject({ cdn_purge_enabled: false, cdn_api_token_set: false });
    expect(full.derived.login_burst).toBeGreaterThan(0);
  });

  test("an invalid second key rejects the whole request and changes nothing", async () => {
    const before = await admin.json("GET", "/api/admin/config/full");
    const attempts = [
      { max_upload_mb: 7, process_webp_method: 9 },
      { max_upload_mb: 7, no_such_key: 1 },
      { max_upload_mb: 7, access_mode: "teleport" },
      { max_upload_mb: 7, default_ttl_hours: 876001 },
      { max_upload_mb: 7, cold_cleanup_days: 36501 },
      { max_upload_mb: 7, delete_grace_minutes: 52560001 },
      { max_upload_mb: 7, health_check_seconds: 3153600001 },
      { max_upload_mb: 7, process_timeout_ms: 3153600000001 },
      { max_upload_mb: 7, base_url: "ftp://example.com" },
      // Values every returned link would break on (ops audit L2): a query or fragment swallows the
      // rest of the link, a bad port, characters that reach HTML and BBCode links unescaped.
      { max_upload_mb: 7, base_url: "https://img.example.com?x=1" },
      { max_upload_mb: 7, base_url: "https://img.example.com#top" },
      { max_upload_mb: 7, base_url: "https://img.example.com:99999" },
      { max_upload_mb: 7, base_url: 'https://img.example.com/"><script>' },
      { max_upload_mb: 7, base_url: "https://user:pw@img.example.com" },
      // The webhook sends no authentication header (spec 5 rule 13), so no credentials in its address.
      { max_upload_mb: 7, alert_webhook_url: "https://user:pw@hooks.example.com/x" },
      { max_upload_mb: 7, alert_webhook_url: "http://[::1" },
      { max_upload_mb: 7, process_formats: ["webp", "bmp"] },
      { max_upload_mb: "7" },
    ];
    for (const body of attempts) await expectError(await admin.request("PUT", "/api/admin/config", body), 400);
    // A rule of our own says what is wrong.
    expect(await expectError(await admin.request("PUT", "/api/admin/config", { base_url: "https://img.example.com?x=1" }), 400)).toBe(
      "配置项 base_url 的值无效：必须是 http(s) 地址（协议、主机、可选端口和路径），不能以 / 结尾，不能带查询参数、锚点或需要转义的字符",
    );
    // A pasted address with its trailing slash is the same site: kept without it.
    expect((await admin.json("PUT", "/api/admin/config", { base_url: "https://img.example.com/" })).settings.base_url).toBe("https://img.example.com");
    expect((await admin.json("PUT", "/api/admin/config", { base_url: "https://example.com/pics//" })).settings.base_url).toBe("https://example.com/pics");
    await admin.json("PUT", "/api/admin/config", { base_url: before.settings.base_url });
    // A bound says what would pass.
    expect(await expectError(await admin.request("PUT", "/api/admin/config", { max_upload_mb: 0 }), 400)).toBe("配置项 max_upload_mb 的值无效：不能小于 1");
    expect(await expectError(await admin.request("PUT", "/api/admin/config", { process_workers: 65 }), 400)).toBe(
      "配置项 process_workers 的值无效：不能大于 64",
    );
    expect(await expectError(await admin.request("PUT", "/api/admin/config", { exif_policy: "keep" }), 400)).toBe(
      "配置项 exif_policy 的值无效：只能是 passthrough、strip",
    );
    expect(await expectError(await admin.request("PUT", "/api/admin/config", { process_widths: Array(65).fill(100) }), 400)).toBe(
      "配置项 process_widths 的值无效：最多 64 项",
    );
    await expectError(await admin.request("PUT", "/api/admin/config", "[1]", { "content-type": "application/json" }), 400);
    await expectError(await admin.request("PUT", "/api/admin/config", "{", { "content-type": "application/json" }), 400);
    expect(await admin.json("GET", "/api/admin/config/full")).toEqual(before);
  });

  test("duration caps accept exactly 100 years in each unit", async () => {
    const caps = {
      default_ttl_hours: 876000,
      cold_cleanup_days: 36500,
      delete_grace_minutes: 52560000,
      health_check_seconds: 3153600000,
      process_timeout_ms: 3153600000000,
    };
    const full = await admin.json("PUT", "/api/admin/config", caps);
    expect(full.settings).toMatchObject(caps);
    // Put sane values back for the other tests.
    await admin.json("PUT", "/api/admin/config", {
      default_ttl_hours: 0,
      cold_cleanup_days: 0,
      delete_grace_minutes: 60,
      health_check_seconds: 60,
      process_timeout_ms: 15000,
    });
  });

  test("changes apply at once and are visible in the read-only slice", async () => {
    const full = await admin.json("PUT", "/api/admin/config", { max_upload_mb: 3, process_widths: [100, 200], access_mode: "redirect" });
    expect(full.settings.max_upload_mb).toBe(3);
    const slice = await admin.json("GET", "/api/admin/config");
    expect(slice).toMatchObject({ max_upload_mb: 3, process_widths: [100, 200], access_mode: "redirect" });
    await admin.json("PUT", "/api/admin/config", { process_widths: null });
    expect((await admin.json("GET", "/api/admin/config")).process_widths).toBeNull();
  });

  test("the CDN token is sealed at rest, blanked on read, kept when omitted, cleared by empty", async () => {
    const secret = "cdn-token-ABCDEF-123456";
    let full = await admin.json("PUT", "/api/admin/config", {
      cdn_provider_api_token: secret,
      cdn_provider_zone_id: "zone1",
      base_url: "https://img.example.com",
    });
    expect(full.settings.cdn_provider_api_token).toBe("");
    expect(full.derived).toMatchObject({ cdn_api_token_set: true, cdn_purge_enabled: true });
    full = await admin.json("PUT", "/api/admin/config", { cdn_provider_zone_id: "zone2" });
    expect(full.derived.cdn_api_token_set).toBe(true);

    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const stored = db.query<{ value: string }, []>("SELECT value FROM settings WHERE key = 'cdn_provider_api_token'").get()!;
    expect(stored.value).not.toContain(secret);
    const audit = db.query<{ detail: string }, []>("SELECT detail FROM audit WHERE action = 'config.update'").all();
    expect(audit.length).toBeGreaterThan(0);
    expect(audit.map((a) => a.detail).join("\n")).not.toContain(secret);
    expect(audit.map((a) => a.detail).join("\n")).toContain("(set)");
    db.close();

    // Survives a restart (decrypted with the master key), then empty clears it.
    await server.stop();
    server = await KuraServer.start({ dataDir: server.dataDir });
    admin = await adminSession(server).catch(async () => {
      const s = new Session(server);
      await s.login("admin", "admin-password-1");
      return s;
    });
    full = await admin.json("GET", "/api/admin/config/full");
    expect(full.derived.cdn_api_token_set).toBe(true);
    full = await admin.json("PUT", "/api/admin/config", { cdn_provider_api_token: "" });
    expect(full.derived).toMatchObject({ cdn_api_token_set: false, cdn_purge_enabled: false });
  });
});
