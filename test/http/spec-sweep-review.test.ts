/**
 * Spec sweep, review and lifetime (spec 2.13, 3.4, 4.9, 6.2): the cleanup list follows real
 * public access and the threshold, un-exempting re-judges, the dashboard agrees with the dedup
 * list and shows alerts, and TTL renewal is judged at access time.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminSession, type Session } from "../helpers/client";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { queryDb, waitFor } from "./channels.helpers";

/** Runs `body` against a fresh server with a logged-in admin. */
async function withServer(body: (server: KuraServer, admin: Session) => Promise<void>) {
  const server = await KuraServer.start();
  try {
    await body(server, await adminSession(server));
  } finally {
    await server.dispose();
  }
}

let seed = 500;
const upload = async (admin: Session, name: string, fields: Record<string, string> = {}) => {
  const bytes = await makeJpeg(40, 30, seed++);
  const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, name, fields));
  return { id: id as string, bytes };
};

/** Uploaded long ago: the only way to age an image without waiting days. Access times stay real. */
function age(server: KuraServer, ...ids: string[]) {
  const db = new Database(join(server.dataDir, "kura.db"));
  for (const id of ids) db.query("UPDATE images SET created_at = '2000-01-01 00:00:00' WHERE id = ?").run(id);
  db.close();
}

const cleanupIds = async (admin: Session) => ((await admin.json("GET", "/api/admin/cleanup?page_size=100")).items as { id: string }[]).map((i) => i.id).sort();
const dashboard = (admin: Session) => admin.json("GET", "/api/admin/dashboard");

test("cold flagging is decided by real public access, not by the thumb or by edited access rows", async () => {
  await withServer(async (server, admin) => {
    const viewed = await upload(admin, "viewed.jpg");
    const thumbOnly = await upload(admin, "thumb-only.jpg");
    const never = await upload(admin, "never.jpg");
    age(server, viewed.id, thumbOnly.id, never.id);
    await admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
    expect((await fetch(server.url(`/i/${viewed.id}`))).status).toBe(200);
    expect((await admin.request("GET", `/api/admin/images/${thumbOnly.id}/thumb`)).status).toBe(200);
    await waitFor(
      () => admin.json("GET", `/api/admin/images/${viewed.id}`),
      (d) => d.access_count === 1,
      10_000,
      "access flush",
    );

    await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30, cleanup_sweep_seconds: 1 });
    await waitFor(
      () => cleanupIds(admin),
      (ids) => ids.includes(never.id),
      10_000,
      "sweep to flag the cold images",
    );
    expect(await cleanupIds(admin)).toEqual([thumbOnly.id, never.id].sort());
    expect((await admin.json("GET", `/api/admin/images/${viewed.id}`)).pending_cleanup).toBe(false);
    expect((await admin.json("GET", `/api/admin/images/${thumbOnly.id}`)).access_count).toBe(0);
  });
});

test("item 2: the cleanup list is re-judged on access flush and when cold_cleanup_days changes", async () => {
  await withServer(async (server, admin) => {
    const a = await upload(admin, "a.jpg");
    const b = await upload(admin, "b.jpg");
    age(server, a.id, b.id);
    await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30, cleanup_sweep_seconds: 1, activity_flush_seconds: 1 });
    await waitFor(
      () => cleanupIds(admin),
      (ids) => ids.length === 2,
      10_000,
      "both flagged",
    );
    expect((await dashboard(admin)).pending_cleanup).toBe(2);

    // A public access takes the image off the list once flushed: it is no longer cold.
    expect((await fetch(server.url(`/i/${a.id}`))).status).toBe(200);
    const accessed = await waitFor(
      () => admin.json("GET", `/api/admin/images/${a.id}`),
      (d) => d.access_count === 1,
      10_000,
      "access flush",
    );
    expect(accessed.pending_cleanup).toBe(false);
    expect(await cleanupIds(admin)).toEqual([b.id]);
    expect((await dashboard(admin)).pending_cleanup).toBe(1);

    // Turning the threshold off empties the list at once, not at some later sweep.
    await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 0 });
    expect(await cleanupIds(admin)).toEqual([]);
    expect((await dashboard(admin)).pending_cleanup).toBe(0);
    expect((await admin.json("GET", `/api/admin/images/${b.id}`)).pending_cleanup).toBe(false);
  });
});

test("un-exempting clears the pending mark and the next scan re-judges the image", async () => {
  await withServer(async (server, admin) => {
    const img = await upload(admin, "exempt.jpg");
    const marker = await upload(admin, "marker.jpg");
    age(server, img.id);
    await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30, cleanup_sweep_seconds: 1 });
    await waitFor(
      () => cleanupIds(admin),
      (ids) => ids.includes(img.id),
      10_000,
      "flagged",
    );

    const exempt = await admin.json("PATCH", `/api/admin/images/${img.id}`, { cleanup_exempt: true });
    expect(exempt).toMatchObject({ cleanup_exempt: true, pending_cleanup: false });
    // While exempt, sweeps pass it by: a marker aged now gets flagged by a later sweep, this one does not.
    age(server, marker.id);
    await waitFor(
      () => cleanupIds(admin),
      (ids) => ids.includes(marker.id),
      10_000,
      "marker flagged by a later sweep",
    );
    expect((await admin.json("GET", `/api/admin/images/${img.id}`)).pending_cleanup).toBe(false);

    await admin.json("PUT", "/api/admin/config", { cleanup_sweep_seconds: 2 });
    const unexempt = await admin.json("PATCH", `/api/admin/images/${img.id}`, { cleanup_exempt: false });
    expect(unexempt).toMatchObject({ cleanup_exempt: false, pending_cleanup: false });
    const rejudged = await waitFor(
      () => admin.json("GET", `/api/admin/images/${img.id}`),
      (d) => d.pending_cleanup,
      10_000,
      "next scan",
    );
    expect(rejudged.cleanup_exempt).toBe(false);
    expect(await cleanupIds(admin)).toEqual([img.id, marker.id].sort());
  });
});

test("item 5: dashboard pending_dedup agrees with the dedup list, and open alerts are on the dashboard", async () => {
  await withServer(async (server, admin) => {
    const [a, b, c] = [await upload(admin, "a.jpg"), await upload(admin, "b.jpg"), await upload(admin, "c.jpg")];
    const blob = (bytes: Buffer) => queryDb<{ id: number }>(server, "SELECT id FROM blobs WHERE sha256 = ?", sha256(bytes))[0]!.id;
    // Pairs a perceptual-hash scan would have found (the scan itself is tested in review.test.ts).
    const db = new Database(join(server.dataDir, "kura.db"));
    const pair = db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, 2, '2020-01-01 00:00:00')");
    pair.run(blob(a.bytes), blob(b.bytes));
    pair.run(blob(a.bytes), blob(c.bytes));
    db.close();
    expect((await admin.json("GET", "/api/admin/dedup")).total).toBe(2);
    expect((await dashboard(admin)).pending_dedup).toBe(2);
    // c's blob loses its last reference: its pair can no longer be merged and leaves the list.
    await admin.json("DELETE", `/api/admin/images/${c.id}`, undefined, 204);
    const list = await admin.json("GET", "/api/admin/dedup");
    expect(list.total).toBe(1);
    expect((await dashboard(admin)).pending_dedup).toBe(list.total);

    // An alert: the default channel's directory becomes a file.
    const root = join(server.dataDir, "storage");
    rmSync(root, { recursive: true, force: true });
    writeFileSync(root, "not a directory");
    await admin.json("POST", "/api/admin/channels/1/check");
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
    const open = await waitFor(
      () => admin.json("GET", "/api/admin/alerts"),
      (r) => r.items.length > 0,
      10_000,
      "channel_unhealthy",
    );
    const board = await dashboard(admin);
    expect(board.alerts).toEqual(open.items);
    expect(board.alerts[0]).toMatchObject({ kind: "channel_unhealthy", target: "local", resolved_at: "" });
  });
});

test("item 8: an access shortly before expiry renews the image even when flushed after the expiry", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    // No periodic flush and no sweep during the test: the one flush happens at shutdown.
    await admin.json("PUT", "/api/admin/config", { ttl_renew_on_access: true, activity_flush_seconds: 3600, cleanup_sweep_seconds: 3600 });
    const { id } = await upload(admin, "ttl.jpg", { ttl: "3" });
    // The expiry clock starts when the upload commits: timed from its answer, so a slow upload on a
    // loaded machine cannot put the access into the upload's own second (expiry has second resolution).
    const uploadedAt = Date.now();
    const before = (await admin.json("GET", `/api/admin/images/${id}`)).expire_at as string;
    await Bun.sleep(Math.max(0, uploadedAt + 1200 - Date.now()));
    // Viewed while still live…
    expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);
    // …and the access is written only after the original expiry has passed.
    await Bun.sleep(Math.max(0, uploadedAt + 4500 - Date.now()));
    expect(await server.stop()).toBe(0);
    const [row] = queryDb<{ expire_at: string; access_count: number }>(server, "SELECT expire_at, access_count FROM images WHERE id = ?", id);
    expect(row!.access_count).toBe(1);
    expect(row!.expire_at > before).toBe(true);
  } finally {
    await server.dispose();
  }
});
