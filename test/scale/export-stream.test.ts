import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { metadataExport } from "../../src/ops/export";
import { metadataExportStream } from "../../src/ops/export-stream";
import { openContext } from "../helpers/context";

test("the streamed export is valid JSON equal to the in-memory export, from one snapshot, a bounded chunk at a time", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-export-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const addBlob = app.db.query(
      `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, created_at)
       VALUES (?, '', ?, 'image/png', ?, 10, 10, 1, '2026-01-01 00:00:00')`,
    );
    const addImage = app.db.query(
      `INSERT INTO images (id, blob_id, user_id, file_name, created_at, access_count, cleanup_exempt) VALUES (?, ?, 'default', ?, ?, ?, ?)`,
    );
    const addReplica = app.db.query("INSERT INTO blob_channels (blob_id, channel_id, state, updated_at) VALUES (?, 1, 'done', '2026-01-01 00:00:00')");
    const add = (i: number) => {
      const blob = Number(addBlob.run(`sha-${i}`, `img/${i}`, 100 + i).lastInsertRowid);
      addReplica.run(blob);
      // Names with quotes, backslashes and non-ASCII must survive the hand-built JSON framing.
      addImage.run(`im${String(i).padStart(8, "0")}`, blob, `名前 "${i}" \\ ${i}.png`, `2026-01-01 00:${String(i % 60).padStart(2, "0")}:00`, i % 7, i % 2);
    };
    app.db.transaction(() => {
      for (let i = 0; i < 6000; i++) add(i);
    })();
    const reference = JSON.parse(JSON.stringify(metadataExport(app)));

    const reader = metadataExportStream(app).getReader();
    const decoder = new TextDecoder();
    const chunks: string[] = [];
    const first = await reader.read();
    chunks.push(decoder.decode(first.value));
    // Written after the export began: not part of its snapshot.
    app.db.transaction(() => {
      for (let i = 6000; i < 6050; i++) add(i);
    })();
    app.db.query("UPDATE images SET file_name = 'renamed' WHERE id = 'im00000001'").run();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      chunks.push(decoder.decode(next.value));
    }
    const streamed = JSON.parse(chunks.join(""));
    expect(streamed).toEqual(reference);
    expect(streamed.images.length).toBe(6000);
    // Bounded: many chunks, none near the size of the whole document.
    const total = chunks.reduce((n, c) => n + c.length, 0);
    expect(chunks.length).toBeGreaterThan(20);
    expect(Math.max(...chunks.map((c) => c.length))).toBeLessThan(total / 10);
    // The export's own connection is closed once the stream ends: a checkpoint can truncate the WAL.
    expect(app.db.query<{ busy: number }, []>("PRAGMA wal_checkpoint(TRUNCATE)").get()!.busy).toBe(0);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("a cancelled export releases its snapshot", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-export-"));
  const ctx = await openContext(dir);
  try {
    const reader = metadataExportStream(ctx.app).getReader();
    await reader.read();
    await reader.cancel();
    // The worker releases its read transaction on its own turn: give it a moment.
    const checkpoint = () => ctx.app.db.query<{ busy: number }, []>("PRAGMA wal_checkpoint(TRUNCATE)").get()!.busy;
    for (let i = 0; i < 100 && checkpoint() !== 0; i++) await Bun.sleep(20);
    expect(checkpoint()).toBe(0);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
