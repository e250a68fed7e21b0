/**
 * `POST /api/admin/images/batch-exempt`: the console's "keep" of a selection in one request per
 * 100 images. Exempt images leave the cleanup list and the counter at once; clearing the
 * exemption does not list them again by itself (the next sweep judges them); unknown ids are
 * reported without stopping the rest; only admins may call it; each change is audited.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

test("batch exempt: leaves the cleanup list, reports unknown ids, admin only, audited", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "erin", password: "password-1" }, 201);
    const erin = new Session(server);
    await erin.login("erin", "password-1");
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const who = i % 2 ? erin : admin;
      ids.push((await who.json("POST", "/api/admin/upload", form(await makeJpeg(40 + i, 30, 700 + i), `k${i}.jpg`))).id);
    }
    const rw = new Database(join(server.dataDir, "kura.db"));
    const flag = rw.query("UPDATE images SET pending_cleanup = 1 WHERE id = ?");
    for (const id of ids) flag.run(id);
    rw.close();
    const listed = async () => {
      const body = await admin.json("GET", "/api/admin/cleanup?page_size=100");
      return { ids: (body.items as { id: string }[]).map((i) => i.id).sort(), total: body.total as number };
    };
    expect((await listed()).total).toBe(6);

    // A regular user may not, whoever owns the images.
    const refused = await erin.request("POST", "/api/admin/images/batch-exempt", { ids: [ids[1]], exempt: true });
    await expectError(refused, 403);
    for (const body of [{ ids: [], exempt: true }, { ids: [ids[0]] }, { ids: [ids[0]], exempt: "yes" }, { ids: Array(101).fill(ids[0]), exempt: true }])
      await expectError(await admin.request("POST", "/api/admin/images/batch-exempt", body), 400);
    expect((await listed()).total).toBe(6);

    // Four images (one of them twice) and an unknown id: the four leave the list, the unknown one is reported.
    const keep = [ids[0]!, ids[1]!, ids[2]!, ids[3]!, ids[0]!, "nosuchimage1"];
    const result = await admin.json("POST", "/api/admin/images/batch-exempt", { ids: keep, exempt: true });
    expect(result).toEqual({ updated: 4, failed: [{ id: "nosuchimage1", error: "图片不存在" }] });
    expect(await listed()).toEqual({ ids: [ids[4]!, ids[5]!].sort(), total: 2 });
    for (const id of ids.slice(0, 4)) expect((await admin.json("GET", `/api/admin/images/${id}`)).cleanup_exempt).toBe(true);
    const exemptOnly = await admin.json("GET", "/api/admin/images?exempt=1&page_size=100");
    expect((exemptOnly.items as { id: string }[]).map((i) => i.id).sort()).toEqual(ids.slice(0, 4).sort());

    // Again: already exempt counts as done, and changes (and audits) nothing.
    expect(await admin.json("POST", "/api/admin/images/batch-exempt", { ids: [ids[0], ids[1]], exempt: true })).toEqual({ updated: 2, failed: [] });

    // Cleared: no longer exempt, and not listed again until a sweep judges them.
    expect(await admin.json("POST", "/api/admin/images/batch-exempt", { ids: [ids[0], ids[1]], exempt: false })).toEqual({ updated: 2, failed: [] });
    expect((await admin.json("GET", `/api/admin/images/${ids[0]}`)).cleanup_exempt).toBe(false);
    expect((await listed()).total).toBe(2);

    // One audit entry per change: four set, two cleared; none for the repeat (the log is newest first).
    const audit = await admin.json("GET", "/api/admin/audit?action=image.update&page_size=100");
    const entries = (audit.items as { target: string; detail: string }[]).map((e) => `${e.target} ${JSON.parse(e.detail).cleanup_exempt}`).reverse();
    expect(entries).toEqual([...ids.slice(0, 4).map((id) => `${id} true`), `${ids[0]} false`, `${ids[1]} false`]);
  } finally {
    await server.stop();
  }
});
