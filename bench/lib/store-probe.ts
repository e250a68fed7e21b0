// One measurement of bench/store.ts, in its own process: `bun bench/lib/store-probe.ts <checkout> <n>`.
// Runs that checkout's storeReference on its real application context (real SQLite file, group
// commit, intents, rollups, indexes) with an in-memory channel, 8 in flight, and prints one JSON
// line: JS-thread CPU per stored reference. `floor` instead records the same upload in the least
// SQL possible (one blob row and one image row, primary keys only, one transaction per upload).
import { Database } from "bun:sqlite";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CONCURRENCY = 8;
const [root, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 6000);
const dir = mkdtempSync(join(tmpdir(), "kura-store-bench-"));

let seed = 0;
function prepared() {
  const bytes = Buffer.alloc(64);
  bytes.writeUInt32BE(++seed, 0);
  return {
    bytes,
    size: 64,
    sha256: createHash("sha256").update(bytes).digest("hex"),
    mime: "image/png",
    ext: "png",
    dimensions: Promise.resolve({ width: 10, height: 10 }),
  };
}

async function measure(store: () => Promise<unknown>): Promise<number> {
  const run = async (count: number) => {
    let left = count;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) await store();
      }),
    );
  };
  await run(Math.min(3000, n)); // warm-up: JIT, page cache, a store that is not empty
  const before = process.threadCpuUsage();
  await run(n);
  const used = process.threadCpuUsage(before);
  return (used.user + used.system) / n;
}

async function kura(checkout: string): Promise<number> {
  const { openContext } = await import(join(checkout, "test/helpers/context.ts"));
  const { storeReference } = await import(join(checkout, "src/images/store.ts"));
  const { app, close } = await openContext(dir);
  const now = new Date().toISOString().slice(0, 19).replace("T", " ");
  const row = app.db.query("INSERT INTO channels (name, driver, config_sealed, bound_at, created_at) VALUES ('bench', 'local', '{}', ?, ?)").run(now, now);
  const channel = { row: { id: Number(row.lastInsertRowid), name: "bench", deleting: 0 }, healthy: true, driver: { async put() {}, async delete() {} } };
  // The same seam as test/unit/upload-store.test.ts: one channel whose writes cost nothing.
  Object.assign(app.channels, {
    writable: () => [channel],
    list: () => [channel],
    get: () => channel,
    put: async (_c: unknown, _k: string, _b: unknown, _s: number, publishAfter?: Promise<unknown>) => void (await publishAfter),
  });
  const ref = { userId: "default", tokenId: null, fileName: "bench.png", objectKey: null, ttlSeconds: null };
  try {
    return await measure(() => storeReference(app, prepared(), ref));
  } finally {
    close();
  }
}

async function floor(): Promise<number> {
  const db = new Database(join(dir, "floor.db"), { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
  db.exec("CREATE TABLE blobs (id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL)");
  db.exec("CREATE TABLE images (id TEXT PRIMARY KEY, blob_id INTEGER NOT NULL, file_name TEXT NOT NULL)");
  const blob = db.query("INSERT INTO blobs (sha256, size) VALUES (?, ?)");
  const image = db.query("INSERT INTO images (id, blob_id, file_name) VALUES (?, ?, 'bench.png')");
  const record = db.transaction((sha: string, size: number) => image.run(sha.slice(0, 10), Number(blob.run(sha, size).lastInsertRowid)));
  try {
    return await measure(async () => {
      const p = prepared();
      await p.dimensions;
      record(p.sha256, p.size);
    });
  } finally {
    db.close();
  }
}

try {
  const us = root === "floor" ? await floor() : await kura(root!);
  console.log(JSON.stringify({ root, n, us }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
