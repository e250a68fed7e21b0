import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { listFiles } from "../helpers/files";
import { KuraServer } from "../helpers/server";

test("killing the server during a burst of uploads leaves every row with bytes and no orphans", async () => {
  const server = await KuraServer.start();
  const admin = await adminSession(server);
  const images = await Promise.all(Array.from({ length: 40 }, (_, i) => makeJpeg(200, 150, 1000 + i)));
  const inflight = images.map((bytes, i) => admin.request("POST", "/api/admin/upload", form(bytes, `burst-${i}.jpg`)).catch(() => undefined));
  await Bun.sleep(150);
  await server.stop("SIGKILL");
  await Promise.all(inflight);

  const restarted = await KuraServer.start({ dataDir: server.dataDir });
  try {
    const s = new Session(restarted);
    await s.login("admin", "admin-password-1");
    await s.json("GET", "/api/admin/images");
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const blobs = db.query<{ storage_key: string }, []>("SELECT storage_key FROM blobs").all().map((b) => b.storage_key);
    const rows = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM images i JOIN blobs b ON b.id = i.blob_id").get()!.n;
    const intents = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM upload_intents").get()!.n;
    db.close();
    const files = listFiles(join(server.dataDir, "storage")).filter((f) => f.startsWith("img/"));
    // Every image row has its bytes, every object belongs to a row, and staging was emptied.
    for (const key of blobs) expect(files).toContain(key);
    expect(files.sort()).toEqual([...blobs].sort());
    expect(intents).toBe(0);
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
    expect(rows).toBe(blobs.length);
  } finally {
    await restarted.dispose();
    await server.dispose();
  }
});
