/**
 * The per-blob cap on similar-image pairs, seen through the API: a burst of near-identical
 * uploads lists each copy with at most its 20 nearest earlier copies, not every pair.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import sharp from "sharp";
import { scanRound } from "../../src/images/dedup";
import { computePhash } from "../../src/images/jobs";
import { adminSession, Session } from "../helpers/client";
import { openContext } from "../helpers/context";
import { form } from "../helpers/images";
import { bruteForce, cappedPairs } from "../helpers/phashes";
import { KuraServer } from "../helpers/server";

const COPIES = 32;

/** One smooth picture; copy `n` differs in one pixel, so its bytes differ and its perceptual hash barely moves. */
function copy(n: number): Promise<Buffer> {
  const [w, h] = [160, 120];
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const v = (Math.sin(x / 9) * Math.cos(y / 13) + 1) * 127;
      px.set([v, (v * 0.7 + x) % 256, 255 - v], (y * w + x) * 3);
    }
  }
  px.set([255, 255, 255], ((n % h) * w + ((n * 7) % w)) * 3);
  return sharp(px, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer();
}

test(`${COPIES} near-identical uploads list each copy with its 20 nearest earlier copies, not every pair`, async () => {
  const first = await KuraServer.start();
  let server: KuraServer | undefined;
  try {
    const admin = await adminSession(first, "admin-password-1");
    for (let n = 0; n < COPIES; n++) await admin.json("POST", "/api/admin/upload", form(await copy(n), `copy-${n}.jpg`));
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
    expect(hashes).toHaveLength(COPIES);
    // Every copy is within the default distance of every other: uncapped, all 496 pairs would be listed.
    expect(bruteForce(hashes, 6)).toHaveLength((COPIES * (COPIES - 1)) / 2);

    server = await KuraServer.start({ dataDir: first.dataDir });
    const session = new Session(server);
    expect((await session.login("admin", "admin-password-1")).status).toBe(200);
    const listed: string[] = [];
    let total = 0;
    for (let page = 1; ; page++) {
      const body = await session.json("GET", `/api/admin/dedup?page_size=100&page=${page}`);
      total = body.total;
      if (!body.items.length) break;
      for (const c of body.items as { a: { blob_id: number }; b: { blob_id: number }; distance: number }[])
        listed.push(`${c.a.blob_id}-${c.b.blob_id}-${c.distance}`);
    }
    const expected = cappedPairs([hashes], 6);
    // Copy k (from 0) gets min(k, 20) pairs.
    expect(expected).toHaveLength((20 * 19) / 2 + (COPIES - 20) * 20);
    expect(total).toBe(expected.length);
    expect(listed.sort()).toEqual(expected);

    // Merging pair after pair, always keeping the newer copy, reaches every copy: the kept blob is
    // paired anew with copies whose only pairs were with blobs merged away. (Without that, copies
    // 21-31, paired only with copies 0-19, were left unlisted once those were gone.)
    let merges = 0;
    for (;;) {
      const body = await session.json("GET", "/api/admin/dedup?page_size=1");
      const [pair] = body.items as { id: number; a: { blob_id: number }; b: { blob_id: number } }[];
      if (!pair) break;
      const keep = Math.max(pair.a.blob_id, pair.b.blob_id);
      await session.json("POST", `/api/admin/dedup/${pair.id}/merge`, { keep_blob_id: keep }, 204);
      merges++;
    }
    const images = (await session.json("GET", "/api/admin/images?page_size=100")).items as { id: string }[];
    expect(images).toHaveLength(COPIES);
    const after = new Database(join(first.dataDir, "kura.db"), { readonly: true });
    const liveBlobs = after.query<{ n: number }, []>("SELECT COUNT(DISTINCT blob_id) AS n FROM images").get()!.n;
    after.close();
    expect({ merges, liveBlobs }).toEqual({ merges: COPIES - 1, liveBlobs: 1 });
  } finally {
    await server?.stop();
    await first.dispose();
  }
}, 90_000);
