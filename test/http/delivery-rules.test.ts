import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { expectError, Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, makePng } from "../helpers/images";

describe("hotlink protection, variant cache bound and TTL renewal", () => {
  let id: string;
  const get = (path: string, referer?: string) => fetch(server.url(path), { headers: referer === undefined ? {} : { referer } });

  const { server, admin } = useAdmin();
  beforeAll(async () => {
    const token = (await admin.json("POST", "/api/admin/tokens", { name: "t" }, 201)).token;
    const res = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(await makeJpeg(64, 64, 5), "a.jpg", { object_key: "pics/a.jpg" }),
    });
    id = (await res.json()).id;
  });

  test("an empty allowlist means protection is off", async () => {
    expect((await get(`/i/${id}`, "https://evil.example/")).status).toBe(200);
  });

  test("bare domains match exactly, *.domain matches subdomains only, changes apply at once", async () => {
    const bare = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "Example.com" }, 201);
    expect(bare.pattern).toBe("example.com");
    const wild = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "*.cdn.example.org" }, 201);
    await expectError(await admin.request("POST", "/api/admin/referer-whitelist", { pattern: "example.com" }), 409);
    for (const bad of ["https://x.com", "example.com/path", "*", "exa mple.com", ""]) {
      await expectError(await admin.request("POST", "/api/admin/referer-whitelist", { pattern: bad }), 400);
    }
    const list = await admin.json("GET", "/api/admin/referer-whitelist");
    expect(list.total).toBe(2);

    const cases: [string, number][] = [
      ["https://example.com/page", 200],
      ["http://EXAMPLE.com:8080/x", 200],
      ["https://www.example.com/", 403],
      ["https://badexample.com/", 403],
      ["https://img.cdn.example.org/a", 200],
      ["https://a.b.cdn.example.org/a", 200],
      ["https://cdn.example.org/", 403],
      ["not a url", 403],
    ];
    for (const [referer, status] of cases) {
      const res = await get(`/i/${id}`, referer);
      expect([referer, res.status]).toEqual([referer, status]);
      if (status === 403) {
        expect(res.headers.get("content-type")).toContain("text/plain");
        expect(res.headers.get("cache-control")).toBeNull();
        expect(await res.text()).toBe("禁止盗链");
      }
    }
    // /o/ is protected too; the admin thumb endpoint is not.
    expect((await get(`/o/default/pics/a.jpg`, "https://evil.example/")).status).toBe(403);
    expect((await admin.request("GET", `/api/admin/images/${id}/thumb`, undefined, { referer: "https://evil.example/" })).status).toBe(200);

    // allow_empty_referer decides for requests without a Referer.
    expect((await get(`/i/${id}`)).status).toBe(200);
    await admin.json("PUT", "/api/admin/config", { allow_empty_referer: false });
    expect((await get(`/i/${id}`)).status).toBe(403);
    expect((await get(`/i/${id}`, "")).status).toBe(403);
    await admin.json("PUT", "/api/admin/config", { allow_empty_referer: true });

    await admin.json("DELETE", `/api/admin/referer-whitelist/${bare.id}`, undefined, 204);
    await admin.json("DELETE", `/api/admin/referer-whitelist/${wild.id}`, undefined, 204);
    await expectError(await admin.request("DELETE", `/api/admin/referer-whitelist/${wild.id}`), 404);
    expect((await get(`/i/${id}`, "https://evil.example/")).status).toBe(200);
  });

  test("regular users cannot manage the allowlist", async () => {
    await admin.json("POST", "/api/admin/users", { name: "plain", password: "password-1" }, 201);
    const s = new Session(server);
    await s.login("plain", "password-1");
    await expectError(await s.request("GET", "/api/admin/referer-whitelist"), 403);
    await expectError(await s.request("POST", "/api/admin/referer-whitelist", { pattern: "a.com" }), 403);
  });

  test("the variant cache stays within variants_cache_mb, evicting the least recently used", async () => {
    await admin.json("PUT", "/api/admin/config", { variants_cache_mb: 1, process_widths: [500, 520, 540, 560, 580, 600], process_formats: ["png"] });
    // Noisy PNGs compress badly, so each variant is several hundred KB.
    const noisy = await Bun.spawn(["true"]).exited.then(async () => {
      const { default: sharp } = await import("sharp");
      return sharp(Buffer.from(crypto.getRandomValues(new Uint8Array(640 * 400 * 3))), { raw: { width: 640, height: 400, channels: 3 } })
        .png({ compressionLevel: 1 })
        .toBuffer();
    });
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    const big = await admin.json("POST", "/api/admin/upload", form(noisy, "noise.png"));
    for (const w of [500, 520, 540, 560, 580, 600]) {
      const res = await get(`/i/${big.id}?w=${w}&format=png`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const dir = join(server.dataDir, "variants");
    const files = listFiles(dir).filter((f) => !f.includes(".tmp"));
    let total = 0;
    for (const f of files) total += Bun.file(join(dir, f)).size;
    expect(total).toBeLessThanOrEqual(1024 * 1024);
    expect(files.length).toBeGreaterThan(0);
    expect(files.length).toBeLessThan(6);
    // The most recent variant survived; the first one was evicted.
    expect(files.some((f) => f.includes("-600-png-"))).toBe(true);
    expect(files.some((f) => f.includes("-500-png-"))).toBe(false);
  });

  test("ttl_renew_on_access extends the expiry of images that have one", async () => {
    await admin.json("PUT", "/api/admin/config", { ttl_renew_on_access: true, activity_flush_seconds: 1 });
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(12, 12, 3), "renew.png", { ttl: "3600" }));
    const db = new Database(join(server.dataDir, "kura.db"));
    // Pretend it was uploaded a while ago and is 10 minutes from expiry.
    const soon = new Date(Date.now() + 600_000).toISOString().slice(0, 19).replace("T", " ");
    db.query("UPDATE images SET expire_at = ? WHERE id = ?").run(soon, up.id);
    db.close();
    expect((await get(`/i/${up.id}`)).status).toBe(200);
    const deadline = Date.now() + 5000;
    let d = await admin.json("GET", `/api/admin/images/${up.id}`);
    while (d.expire_at <= soon && Date.now() < deadline) {
      await Bun.sleep(200);
      d = await admin.json("GET", `/api/admin/images/${up.id}`);
    }
    const expires = Date.parse(`${d.expire_at.replace(" ", "T")}Z`);
    expect(Math.abs(expires - (Date.now() + 3600_000))).toBeLessThan(15_000);
  });
});
