import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import sharp from "sharp";
import { scanRound } from "../../src/images/dedup";
import { computePhash } from "../../src/images/jobs";
import { adminSession, expectError, Session } from "../helpers/client";
import { openContext } from "../helpers/context";
import { form, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";

const ADMIN_PASSWORD = "admin-password-1";

/** Distinct smooth pictures: re-encoding one keeps its perceptual hash within a few bits, the others are 24+ bits away. */
const WAVES = [
  (x: number, y: number) => Math.sin(x / 9) * Math.cos(y / 13),
  (x: number, y: number) => Math.sin(y / 7 + x / 17),
  (x: number, y: number) => Math.cos(((x - 80) * (x - 80)) / 900 + ((y - 60) * (y - 60)) / 500),
];

function picture(variant: number, quality: number): Promise<Buffer> {
  const [w, h] = [160, 120];
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const v = (WAVES[variant]!(x, y) + 1) * 127;
      px.set([v, (v * 0.7 + x) % 256, 255 - v], (y * w + x) * 3);
    }
  }
  return sharp(px, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
}

async function login(server: KuraServer, name: string, password: string): Promise<Session> {
  const s = new Session(server);
  const res = await s.login(name, password);
  if (res.status !== 200) throw new Error(`login ${name}: ${res.status} ${await res.text()}`);
  return s;
}

test("similar-image scan, merge and dismiss; the cold-image cleanup list", async () => {
  const first = await KuraServer.start();
  let server: KuraServer | undefined;
  try {
    const admin = await adminSession(first, ADMIN_PASSWORD);
    await admin.json("POST", "/api/admin/users", { name: "carol", password: "password-1" }, 201);
    const carol = await login(first, "carol", "password-1");

    // A and B: one picture at two JPEG qualities (different sha256); C and C2 likewise; E unrelated.
    const bytes = { A: await picture(0, 92), B: await picture(0, 35), C: await picture(1, 92), C2: await picture(1, 35), E: await picture(2, 90) };
    expect(sha256(bytes.A)).not.toBe(sha256(bytes.B));
    const ids: Record<string, string> = {};
    for (const [name, b] of Object.entries(bytes)) ids[name] = (await admin.json("POST", "/api/admin/upload", form(b, `${name}.jpg`))).id;
    // Carol's copy of B shares B's blob, so merging must move two references.
    ids.carolB = (await carol.json("POST", "/api/admin/upload", form(bytes.B, "mine.jpg"))).id;
    const sha: Record<string, string> = {};
    for (const [name, id] of Object.entries(ids)) sha[name] = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    expect(sha.carolB).toBe(sha.B);

    // Hashing waits 30 s after upload and the scan an hour: run both in-process over the stopped server's data.
    await first.stop();
    const ctx = await openContext(first.dataDir);
    const blob: Record<string, number> = {};
    try {
      for (const name of ["A", "B", "C", "C2", "E"]) blob[name] = ctx.app.images.blobBySha(sha[name]!)!.id;
      for (const name of ["A", "B", "C", "E"]) await computePhash(ctx.app, { blob_id: blob[name]! });
      expect(await scanRound(ctx.app)).toEqual({ compared: 4, found: 1 });
      // C2 is hashed late although a newer blob (E) was already scanned: the next round still compares it.
      await computePhash(ctx.app, { blob_id: blob.C2! });
      expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 1 });
      // Nothing new hashed: the next round compares nothing.
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    } finally {
      ctx.close();
    }

    server = await KuraServer.start({ dataDir: first.dataDir });
    const admin2 = await login(server, "admin", ADMIN_PASSWORD);
    const carol2 = await login(server, "carol", "password-1");
    await expectError(await carol2.request("GET", "/api/admin/dedup"), 403);
    await expectError(await carol2.request("GET", "/api/admin/cleanup"), 403);

    const listed = await admin2.json("GET", "/api/admin/dedup");
    expect(listed.total).toBe(2);
    const pairs = listed.items.map((c: any) => [c.a.blob_id, c.b.blob_id]);
    expect(pairs).toEqual([
      [blob.A, blob.B],
      [blob.C, blob.C2],
    ]);
    const ab = listed.items[0];
    expect(ab.distance).toBeLessThanOrEqual(6);
    expect(listed.items[1].distance).toBeGreaterThan(0);
    expect(ab.a).toEqual({ blob_id: blob.A, image_id: ids.A, mime: "image/jpeg", size: bytes.A.length, width: 160, height: 120, refs: 1 });
    expect(ab.b).toMatchObject({ blob_id: blob.B, image_id: ids.B, size: bytes.B.length, refs: 2 });

    await expectError(await carol2.request("POST", `/api/admin/dedup/${ab.id}/merge`, { keep_blob_id: blob.A }), 403);
    await expectError(await admin2.request("POST", `/api/admin/dedup/${ab.id}/merge`, { keep_blob_id: blob.E }), 400);
    await expectError(await admin2.request("POST", `/api/admin/dedup/${ab.id}/merge`, { keep_blob_id: blob.A, extra: 1 }), 400);
    await expectError(await admin2.request("POST", "/api/admin/dedup/999999/merge", { keep_blob_id: blob.A }), 404);

    // Served once before the merge, so a stale delivery lookup would still point at B's bytes.
    expect((await fetch(server.url(`/i/${ids.B}`))).headers.get("etag")).toBe(`"${sha.B}"`);
    await admin2.json("POST", `/api/admin/dedup/${ab.id}/merge`, { keep_blob_id: blob.A }, 204);
    for (const id of [ids.B, ids.carolB]) {
      const res = await fetch(server.url(`/i/${id}`));
      expect(res.headers.get("etag")).toBe(`"${sha.A}"`);
      expect(sha256(await res.arrayBuffer())).toBe(sha.A);
    }
    expect((await admin2.json("GET", `/api/admin/images/${ids.B}`)).ref_count).toBe(3);
    await expectError(await admin2.request("POST", `/api/admin/dedup/${ab.id}/merge`, { keep_blob_id: blob.A }), 409);
    const audit = await admin2.json("GET", "/api/admin/audit?action=dedup.merge");
    expect(audit.items.map((e: any) => e.target)).toEqual([String(ab.id)]);
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const removed = db
      .query<{ ref_count: number; pending_delete: number; delete_after: string | null }, [number]>("SELECT * FROM blobs WHERE id = ?")
      .get(blob.B!)!;
    expect(removed).toMatchObject({ ref_count: 0, pending_delete: 1 });
    expect(removed.delete_after).not.toBeNull();
    expect(db.query("SELECT 1 FROM jobs WHERE kind = 'blob.delete' AND unique_key LIKE ?").get(`blob-delete:${blob.B}:%`)).not.toBeNull();
    db.close();

    const left = await admin2.json("GET", "/api/admin/dedup");
    expect(left.items.map((c: any) => c.a.blob_id)).toEqual([blob.C]);
    const cc = left.items[0].id;
    await expectError(await carol2.request("POST", `/api/admin/dedup/${cc}/dismiss`), 403);
    await admin2.json("POST", `/api/admin/dedup/${cc}/dismiss`, undefined, 204);
    await expectError(await admin2.request("POST", `/api/admin/dedup/${cc}/dismiss`), 409);
    await expectError(await admin2.request("POST", "/api/admin/dedup/999999/dismiss"), 404);
    expect(await admin2.json("GET", "/api/admin/dedup")).toEqual({ items: [], total: 0, next_cursor: null });

    // Cleanup review: flagged and not exempt only, longest unused first.
    const rw = new Database(join(server.dataDir, "kura.db"));
    rw.query("UPDATE images SET pending_cleanup = 1, last_public_access_at = '2001-01-01 00:00:00' WHERE id = ?").run(ids.C!);
    rw.query("UPDATE images SET pending_cleanup = 1, last_public_access_at = NULL, created_at = '2000-06-01 00:00:00' WHERE id = ?").run(ids.C2!);
    rw.query("UPDATE images SET pending_cleanup = 1, cleanup_exempt = 1 WHERE id = ?").run(ids.E!);
    rw.close();
    const cold = await admin2.json("GET", "/api/admin/cleanup");
    expect(cold.total).toBe(2);
    expect(cold.items.map((i: any) => i.id)).toEqual([ids.C2, ids.C]);
    expect(cold.items[1]).toMatchObject({
      url: `/i/${ids.C}`,
      user_id: "default",
      file_name: "C.jpg",
      mime: "image/jpeg",
      size: bytes.C.length,
      width: 160,
      height: 120,
      last_access_at: "2001-01-01 00:00:00",
    });
    expect((await admin2.json("GET", "/api/admin/cleanup?page=2&page_size=1")).items.map((i: any) => i.id)).toEqual([ids.C]);
    await admin2.json("PATCH", `/api/admin/images/${ids.C2}`, { cleanup_exempt: true });
    expect((await admin2.json("GET", "/api/admin/cleanup")).items.map((i: any) => i.id)).toEqual([ids.C]);
  } finally {
    await server?.stop();
    await first.dispose();
  }
}, 60_000);
