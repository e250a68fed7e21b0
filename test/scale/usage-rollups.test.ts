import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { merge } from "../../src/images/dedup";
import { sweepRound } from "../../src/images/sweep";
import { SYSTEM_ACTOR } from "../../src/ops/audit";
import { adminSession, Session } from "../helpers/client";
import { openContext } from "../helpers/context";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

type Row = Record<string, number | string>;

/** The rollup tables next to a recount over the rows they summarise; users/channels without rows count as zero. */
function rollupsAndRecount(dataDir: string) {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  try {
    const nonZero = (rows: Row[]) => rows.filter((r) => Object.entries(r).some(([k, v]) => !k.endsWith("_id") && v !== 0));
    const users = nonZero(db.query<Row, []>("SELECT user_id, images, bytes, accesses, traffic FROM user_usage ORDER BY user_id").all());
    const userRecount = db
      .query<Row, []>(
        `SELECT i.user_id, COUNT(*) AS images, SUM(b.size) AS bytes, SUM(i.access_count) AS accesses, SUM(i.access_count * b.size) AS traffic
         FROM images i JOIN blobs b ON b.id = i.blob_id GROUP BY i.user_id ORDER BY i.user_id`,
      )
      .all();
    const channels = nonZero(db.query<Row, []>("SELECT channel_id, blobs, bytes, pending, failed FROM channel_usage ORDER BY channel_id").all());
    const channelRecount = nonZero(
      db
        .query<Row, []>(
          `SELECT bc.channel_id, SUM(bc.state = 'done') AS blobs, SUM(CASE WHEN bc.state = 'done' THEN b.size ELSE 0 END) AS bytes,
                  SUM(bc.state = 'pending') AS pending, SUM(bc.state = 'failed') AS failed
           FROM blob_channels bc JOIN blobs b ON b.id = bc.blob_id GROUP BY bc.channel_id ORDER BY bc.channel_id`,
        )
        .all(),
    );
    return { users, userRecount, channels, channelRecount };
  } finally {
    db.close();
  }
}

function expectRollupsEqualRecount(dataDir: string) {
  const r = rollupsAndRecount(dataDir);
  expect(r.users).toEqual(r.userRecount);
  expect(r.channels).toEqual(r.channelRecount);
  return r;
}

async function login(server: KuraServer, name: string, password: string) {
  const s = new Session(server);
  expect((await s.login(name, password)).status).toBe(200);
  return s;
}

test("usage rollups equal a recount after uploads, deletes, accesses, a merge, expiries and a kill -9", async () => {
  const jpegs = await Promise.all(Array.from({ length: 12 }, (_, i) => makeJpeg(120 + i * 8, 90, 500 + i)));
  const first = await KuraServer.start();
  let second: KuraServer | undefined;
  let third: KuraServer | undefined;
  try {
    const admin = await adminSession(first);
    await admin.json("POST", "/api/admin/users", { name: "bob", password: "password-1", quota_bytes: jpegs[0]!.length * 3 + 10 }, 201);
    const bob = await login(first, "bob", "password-1");
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await admin.json("POST", "/api/admin/upload", form(jpegs[i]!, `a-${i}.jpg`, i < 3 ? { ttl: "3600" } : {}))).id);
    // Bob shares admin's first blob and owns two of his own; each reference counts in full.
    const bobIds: string[] = [];
    for (const b of [jpegs[0]!, jpegs[0]!, jpegs[9]!]) {
      const res = await bob.request("POST", "/api/admin/upload", form(b, "b.jpg"));
      if (res.status === 201 || res.status === 200) bobIds.push(((await res.json()) as { id: string }).id);
      else expect(res.status).toBe(403); // over quota: the rollup said so
    }
    expect(bobIds.length).toBeGreaterThanOrEqual(2);
    // Public accesses feed access counts and traffic at the flush (graceful stop flushes).
    for (const id of [ids[3]!, ids[3]!, ids[4]!, bobIds[0]!]) expect((await fetch(first.url(`/i/${id}`))).status).toBe(200);
    await admin.json("DELETE", `/api/admin/images/${ids[7]}`, undefined, 204);
    const users = await admin.json<{ items: { name: string; used_bytes: number; image_count: number }[] }>("GET", "/api/admin/users");
    expect(users.items.find((u) => u.name === "bob")!.image_count).toBe(bobIds.length);
    await first.stop();
    expectRollupsEqualRecount(first.dataDir);

    // A merge re-points references to another blob; expiries delete through the sweep.
    const ctx = await openContext(first.dataDir);
    try {
      const blobOf = (id: string) => ctx.app.images.view(id)!.blob_id;
      const [a, b] = [blobOf(ids[3]!), blobOf(ids[5]!)].sort((x, y) => x - y);
      const cand = ctx.app.db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, 3, '2026-01-01 00:00:00')").run(a!, b!);
      // merge throws a domain error when it cannot merge; returning means it merged.
      expect(() => merge(ctx.app, Number(cand.lastInsertRowid), blobOf(ids[5]!), SYSTEM_ACTOR)).not.toThrow();
      ctx.app.db.query("UPDATE images SET expire_at = '2000-01-01 00:00:00' WHERE id IN (?, ?)").run(ids[0]!, ids[1]!);
      expect((await sweepRound(ctx.app)).expired).toBe(2);
    } finally {
      ctx.close();
    }
    const afterMerge = expectRollupsEqualRecount(first.dataDir);
    expect(afterMerge.users.length).toBe(2);

    // A burst of uploads and deletes cut by SIGKILL: committed or not, rollups and rows agree after restart.
    second = await KuraServer.start({ dataDir: first.dataDir });
    const admin2 = await login(second, "admin", "admin-password-1");
    const burst = Array.from({ length: 30 }, (_, i) =>
      admin2.request("POST", "/api/admin/upload", form(jpegs[i % jpegs.length]!, `burst-${i}.jpg`)).catch(() => undefined),
    );
    const deletes = [ids[2]!, ids[4]!].map((id) => admin2.request("DELETE", `/api/admin/images/${id}`).catch(() => undefined));
    await Bun.sleep(120);
    await second.stop("SIGKILL");
    await Promise.all([...burst, ...deletes]);
    third = await KuraServer.start({ dataDir: first.dataDir });
    await third.stop();
    const afterCrash = expectRollupsEqualRecount(first.dataDir);
    expect(afterCrash.users.length).toBeGreaterThan(0);
  } finally {
    await third?.dispose();
    await second?.dispose();
    await first.dispose();
  }
}, 120_000);

test("a corrected blob size moves every rollup that counted it", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "eve", password: "password-1" }, 201);
    const eve = await login(server, "eve", "password-1");
    const bytes = await makeJpeg(50, 40, 77);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "x.jpg"));
    await eve.request("POST", "/api/admin/upload", form(bytes, "y.jpg"));
    expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);
    await server.stop();
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("UPDATE blobs SET size = size * 1000").run();
    db.close();
    const r = expectRollupsEqualRecount(server.dataDir);
    expect(r.users.length).toBe(2);
  } finally {
    await server.dispose();
  }
}, 180_000);
