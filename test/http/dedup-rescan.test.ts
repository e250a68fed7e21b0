import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import sharp from "sharp";
import { scanRound } from "../../src/images/dedup";
import { computePhash } from "../../src/images/jobs";
import { hamming, phashToInt } from "../../src/images/phash-index";
import { adminSession, Session } from "../helpers/client";
import { openContext } from "../helpers/context";
import { form } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { settled } from "../helpers/settle";

const WAVES = [
  (x: number, y: number) => Math.sin(x / 9) * Math.cos(y / 13),
  (x: number, y: number) => Math.sin(y / 7 + x / 17),
  (x: number, y: number) => Math.cos(((x - 80) * (x - 80)) / 900 + ((y - 60) * (y - 60)) / 500),
];

/** A smooth picture; `warp` bends it a little, so its perceptual hash moves a few to a few dozen bits. */
function picture(variant: number, warp: number, quality = 90): Promise<Buffer> {
  const [w, h] = [160, 120];
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const v = (WAVES[variant]!(x + warp * Math.sin(y / 11), y + warp * Math.cos(x / 23)) + 1) * 127;
      px.set([v, (v * 0.7 + x) % 256, 255 - v], (y * w + x) * 3);
    }
  }
  return sharp(px, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
}

/** Every pair within `distance`, by comparing each hash with each other one. */
function bruteForce(hashes: { id: number; phash: string }[], distance: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < hashes.length; i++) {
    for (let j = i + 1; j < hashes.length; j++) {
      const d = hamming(phashToInt(hashes[i]!.phash), phashToInt(hashes[j]!.phash));
      if (d <= distance) out.push(`${hashes[i]!.id}-${hashes[j]!.id}-${d}`);
    }
  }
  return out.sort();
}

test("raising dedup_phash_max_distance rescans the blobs already scanned: the listed pairs equal brute force at the new distance", async () => {
  const first = await KuraServer.start();
  let server: KuraServer | undefined;
  try {
    const admin = await adminSession(first, "admin-password-1");
    for (let v = 0; v < WAVES.length; v++) {
      for (const warp of [0, 2, 5, 9, 14]) await admin.json("POST", "/api/admin/upload", form(await picture(v, warp), `w${v}-${warp}.jpg`));
    }
    // Hashing waits 30 s after upload and the scan an hour: both run in-process over the stopped server's data.
    await first.stop();
    const ctx = await openContext(first.dataDir);
    try {
      for (const { id } of ctx.app.db.query<{ id: number }, []>("SELECT id FROM blobs").all()) await computePhash(ctx.app, { blob_id: id });
      await scanRound(ctx.app);
    } finally {
      ctx.close();
    }
    const db = new Database(join(first.dataDir, "kura.db"), { readonly: true });
    const hashes = db.query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs ORDER BY id").all();
    db.close();
    expect(hashes.every((h) => h.phash.length === 16)).toBe(true);
    const RAISED = 20;
    // The pictures give pairs on both sides of the default distance 6 and of the raised one.
    expect(bruteForce(hashes, 6).length).toBeGreaterThan(0);
    expect(bruteForce(hashes, RAISED).length).toBeGreaterThan(bruteForce(hashes, 6).length);
    expect(bruteForce(hashes, 64).length).toBeGreaterThan(bruteForce(hashes, RAISED).length);

    server = await KuraServer.start({ dataDir: first.dataDir });
    const session = new Session(server);
    expect((await session.login("admin", "admin-password-1")).status).toBe(200);
    const listed = async () =>
      (await session.json("GET", "/api/admin/dedup?page_size=100")).items
        .map((c: { a: { blob_id: number }; b: { blob_id: number }; distance: number }) => `${c.a.blob_id}-${c.b.blob_id}-${c.distance}`)
        .sort() as string[];
    expect(await listed()).toEqual(bruteForce(hashes, 6));

    await session.json("PUT", "/api/admin/config", { dedup_phash_max_distance: RAISED });
    const expected = bruteForce(hashes, RAISED);
    expect(await settled(listed, (pairs) => pairs.length === expected.length, 10_000)).toEqual(expected);
    await server.waitForLog(/msg=相似图片重新扫描完成 distance=20 blobs=15 found=[1-9]/);

    // Lowered: the pairs already listed stay until merged or dismissed.
    await session.json("PUT", "/api/admin/config", { dedup_phash_max_distance: 6 });
    await Bun.sleep(300);
    expect(await listed()).toEqual(expected);
  } finally {
    await server?.stop();
    await first.dispose();
  }
}, 90_000);
