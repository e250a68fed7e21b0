import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { expectError, Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, makePng } from "../helpers/images";

describe("image admin API", () => {
  let carol: Session;
  let carolId: string;
  const carolImages: string[] = [];
  const adminImages: string[] = [];

  const { server, admin } = useAdmin();
  beforeAll(async () => {
    carolId = (await admin.json("POST", "/api/admin/users", { name: "carol", password: "password-1" }, 201)).id;
    carol = new Session(server);
    await carol.login("carol", "password-1");
    for (let i = 0; i < 3; i++) carolImages.push((await carol.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 200 + i), `holiday-${i}.jpg`))).id);
    for (let i = 0; i < 25; i++) adminImages.push((await admin.json("POST", "/api/admin/upload", form(await makePng(8, 8, 300 + i), `admin_${i}%.png`))).id);
  });

  test("regular users see only their own images; admins see all and may filter by user", async () => {
    const own = await carol.json("GET", "/api/admin/images");
    expect(own.total).toBe(3);
    expect(own.items.every((i: { user_id: string }) => i.user_id === carolId)).toBe(true);
    await expectError(await carol.request("GET", "/api/admin/images?user_id=default"), 403);
    const all = await admin.json("GET", "/api/admin/images");
    expect(all.total).toBe(28);
    const filtered = await admin.json("GET", `/api/admin/images?user_id=${carolId}`);
    expect(filtered.total).toBe(3);
    await expectError(await carol.request("GET", `/api/admin/images/${adminImages[0]}`), 404);
    await carol.json("GET", `/api/admin/images/${carolImages[0]}`);
  });

  test("pagination: default 20, page_size capped at 100, newest first", async () => {
    const first = await admin.json("GET", "/api/admin/images");
    expect(first.items).toHaveLength(20);
    const second = await admin.json("GET", "/api/admin/images?page=2");
    expect(second.items).toHaveLength(8);
    const ids = [...first.items, ...second.items].map((i: { id: string }) => i.id);
    expect(new Set(ids).size).toBe(28);
    expect((await admin.json("GET", "/api/admin/images?page_size=1000")).items).toHaveLength(28);
    const created = first.items.map((i: { created_at: string }) => i.created_at);
    expect([...created].sort().reverse()).toEqual(created);
    await expectError(await admin.request("GET", "/api/admin/images?page=0"), 400);
    await expectError(await admin.request("GET", "/api/admin/images?page_size=abc"), 400);
  });

  test("search, token_id, since/until and exempt filters", async () => {
    expect((await admin.json("GET", "/api/admin/images?search=holiday")).total).toBe(3);
    // LIKE wildcards in the keyword are literal.
    expect((await admin.json("GET", `/api/admin/images?search=${encodeURIComponent("_1%")}`)).total).toBe(1);
    expect((await admin.json("GET", "/api/admin/images?token_id=1")).total).toBe(0);
    const all = (await admin.json("GET", "/api/admin/images?page_size=100")).items;
    const oldest = all.at(-1).created_at;
    expect((await admin.json("GET", `/api/admin/images?since=${encodeURIComponent(oldest)}`)).total).toBe(28);
    expect((await admin.json("GET", `/api/admin/images?until=${encodeURIComponent(oldest)}`)).total).toBe(0);
    expect((await admin.json("GET", "/api/admin/images?until=2999-01-01%2000:00:00")).total).toBe(28);
    await expectError(await admin.request("GET", "/api/admin/images?since=yesterday"), 400);
    await admin.json("PATCH", `/api/admin/images/${carolImages[1]}`, { cleanup_exempt: true });
    const exempt = await admin.json("GET", "/api/admin/images?exempt=1");
    expect(exempt.items.map((i: { id: string }) => i.id)).toEqual([carolImages[1]]);
    await expectError(await admin.request("GET", "/api/admin/images?exempt=2"), 400);
  });

  test("PATCH: ttl_hours by the owner, cleanup_exempt by admins only", async () => {
    const id = carolImages[0]!;
    const updated = await carol.json("PATCH", `/api/admin/images/${id}`, { ttl_hours: 2 });
    expect(updated.ttl_seconds).toBe(7200);
    expect(Math.abs(Date.parse(`${updated.expire_at.replace(" ", "T")}Z`) - Date.now() - 7200_000)).toBeLessThan(10_000);
    expect(updated.replicas[0]).toMatchObject({ channel_name: "local", state: "done" });
    const permanent = await carol.json("PATCH", `/api/admin/images/${id}`, { ttl_hours: 0 });
    expect([permanent.expire_at, permanent.ttl_seconds]).toEqual([null, null]);
    expect(await expectError(await carol.request("PATCH", `/api/admin/images/${id}`, { cleanup_exempt: true }), 403)).toContain("管理员");
    await expectError(await admin.request("PATCH", `/api/admin/images/${id}`, { ttl_hours: 1 }), 403);
    await expectError(await carol.request("PATCH", `/api/admin/images/${id}`, {}), 400);
    await expectError(await carol.request("PATCH", `/api/admin/images/${id}`, { ttl_hours: 876001 }), 400);
    await expectError(await carol.request("PATCH", `/api/admin/images/${id}`, { ttl_hours: 1, extra: 1 }), 400);
    await expectError(await carol.request("PATCH", `/api/admin/images/${adminImages[0]}`, { ttl_hours: 1 }), 404);
    const exempt = await admin.json("PATCH", `/api/admin/images/${id}`, { cleanup_exempt: true });
    expect(exempt).toMatchObject({ cleanup_exempt: true, pending_cleanup: false });
  });

  test("batch delete: 1–100 ids, per-item failures, another user's image counts as not found", async () => {
    await expectError(await carol.request("POST", "/api/admin/images/batch-delete", { ids: [] }), 400);
    await expectError(await carol.request("POST", "/api/admin/images/batch-delete", { ids: Array.from({ length: 101 }, (_, i) => `x${i}`) }), 400);
    const res = await carol.json("POST", "/api/admin/images/batch-delete", { ids: [carolImages[2], adminImages[0], "nope000000"] });
    expect(res.deleted).toBe(1);
    expect(res.failed.map((f: { id: string }) => f.id).sort()).toEqual([adminImages[0], "nope000000"].sort());
    expect(res.failed.every((f: { error: string }) => /[\u4e00-\u9fff]/.test(f.error))).toBe(true);
    await expectError(await carol.request("GET", `/api/admin/images/${carolImages[2]}`), 404);
    await admin.json("GET", `/api/admin/images/${adminImages[0]}`);
    const ok = await admin.json("POST", "/api/admin/images/batch-delete", { ids: adminImages.slice(20) });
    expect(ok).toEqual({ deleted: 5, failed: [] });
  });

  test("DELETE removes the reference at once; the blob goes after the grace period only when unreferenced", async () => {
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
    const bytes = await makeJpeg(30, 30, 555);
    const a = await admin.json("POST", "/api/admin/upload", form(bytes, "shared.jpg"));
    const b = await carol.json("POST", "/api/admin/upload", form(bytes, "shared.jpg"));
    const sha = (await admin.json("GET", `/api/admin/images/${a.id}`)).sha256;
    const blobFile = () => {
      const dir = join(server.dataDir, "storage", "img", sha.slice(0, 2), sha.slice(2, 4));
      return existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith(sha)) : [];
    };
    expect(blobFile()).toHaveLength(1);
    await expectError(await carol.request("DELETE", `/api/admin/images/${a.id}`), 404);
    expect((await admin.request("DELETE", `/api/admin/images/${a.id}`)).status).toBe(204);
    await expectError(await admin.request("GET", `/api/admin/images/${a.id}`), 404);
    // Carol still references it: the blob is neither marked for deletion nor has a delete job queued.
    const state = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const blob = state
      .query<{ id: number; ref_count: number; pending_delete: number }, [string]>("SELECT id, ref_count, pending_delete FROM blobs WHERE sha256 = ?")
      .get(sha)!;
    const deleteJobs = state.query("SELECT id FROM jobs WHERE kind = 'blob.delete' AND json_extract(payload, '$.blob_id') = ?").all(blob.id);
    state.close();
    expect([blob.ref_count, blob.pending_delete, deleteJobs.length]).toEqual([1, 0, 0]);
    expect(blobFile()).toHaveLength(1);
    expect((await carol.json("GET", `/api/admin/images/${b.id}`)).ref_count).toBe(1);
    await carol.json("DELETE", `/api/admin/images/${b.id}`, undefined, 204);
    const deadline = Date.now() + 10_000;
    while (blobFile().length && Date.now() < deadline) await Bun.sleep(100);
    expect(blobFile()).toHaveLength(0);
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    expect(db.query("SELECT 1 FROM blobs WHERE sha256 = ?").get(sha)).toBeNull();
    db.close();
    await expectError(await admin.request("DELETE", `/api/admin/images/${a.id}`), 404);
  });

  test("a grace period keeps the blob, and re-uploading revives it", async () => {
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 60 });
    const bytes = await makeJpeg(31, 31, 556);
    const a = await admin.json("POST", "/api/admin/upload", form(bytes, "g.jpg"));
    await admin.json("DELETE", `/api/admin/images/${a.id}`, undefined, 204);
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const blob = db
      .query<{ pending_delete: number; delete_after: string; ref_count: number }, []>(
        "SELECT pending_delete, delete_after, ref_count FROM blobs ORDER BY id DESC LIMIT 1",
      )
      .get()!;
    expect(blob).toMatchObject({ pending_delete: 1, ref_count: 0 });
    expect(Date.parse(`${blob.delete_after.replace(" ", "T")}Z`)).toBeGreaterThan(Date.now() + 50 * 60_000);
    const again = await admin.json("POST", "/api/admin/upload", form(bytes, "g.jpg"));
    expect((await admin.json("GET", `/api/admin/images/${again.id}`)).ref_count).toBe(1);
    const revived = db.query<{ pending_delete: number }, []>("SELECT pending_delete FROM blobs ORDER BY id DESC LIMIT 1").get()!;
    expect(revived.pending_delete).toBe(0);
    db.close();
  });
});
