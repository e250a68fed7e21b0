/**
 * Fault tier: the machine's temporary directory is full (a small /tmp tmpfs filled by something
 * else, as on many VPS images), while the data dir has room. Kura keeps its own temporary files in
 * the data dir; SQLite would put its statement journals and sort files in TMPDIR, so a write that
 * spilled one there failed with "database or disk is full" and Kura answered a disk-full error
 * about a disk that was not full. Kura's connections keep SQLite's temporary storage in memory.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import sharp from "sharp";
import { adminSession, type Session } from "../helpers/client";
import { form, makePng } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";
import { fillDisk, freeBytes, mountTmpfs } from "./harness";

const tempDir = useTempDirs();
const tmp = mountTmpfs(1);
const fullTmp = { TMPDIR: tmp.dir, SQLITE_TMPDIR: tmp.dir };
let dataDir: string;
let server: KuraServer;
let admin: Session;

beforeAll(async () => {
  fillDisk(tmp.dir);
  expect(freeBytes(tmp.dir)).toBe(0);
  dataDir = tempDir("kura-full-tmpdir-");
  server = await KuraServer.start({ dataDir, env: fullTmp });
  admin = await adminSession(server);
  await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000 });
});
afterAll(async () => {
  await server?.stop();
  tmp.unmount();
});

test("with TMPDIR full, uploads in a busy group commit and batch deletes all succeed", async () => {
  const ids: string[] = [];
  for (let round = 0; round < 25; round++) {
    const batch = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await admin.request("POST", "/api/admin/upload", form(await makePng(16, 16, round * 8 + i), `t${round}-${i}.png`));
        expect(res.status, server.logs.slice(-3000)).toBe(200);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    ids.push(...batch);
  }
  for (let at = 0; at < ids.length; at += 100) {
    const removed = await admin.json<{ deleted: number; failed: unknown[] }>("POST", "/api/admin/images/batch-delete", { ids: ids.slice(at, at + 100) });
    expect(removed).toEqual({ deleted: Math.min(100, ids.length - at), failed: [] });
  }
  expect(server.logs).not.toMatch(/SQLITE_FULL|disk is full|磁盘已满/);
}, 120_000);

test("with TMPDIR full, a large picture is stored, rotated and rendered (libvips keeps nothing there either)", async () => {
  const [width, height] = [9000, 6000]; // 162 MB decoded: past libvips' 100 MB threshold for spilling to disk
  const jpeg = await sharp({ create: { width, height, channels: 3, background: { r: 40, g: 90, b: 160 } } })
    .withMetadata({ orientation: 6 })
    .jpeg({ quality: 70 })
    .toBuffer();
  const stored = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(jpeg, "large.jpg"));
  const image = await admin.json<{ width: number; height: number }>("GET", `/api/admin/images/${stored.id}`);
  expect([image.width, image.height]).toEqual([height, width]); // orientation 6: shown turned
  for (const query of ["w=640&format=webp", "w=1280&format=avif", "w=1920&format=png"]) {
    const res = await fetch(server.url(`/i/${stored.id}?${query}`));
    expect([query, res.status]).toEqual([query, 200]);
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect(meta.width).toBeGreaterThan(0);
  }
  expect(server.logs).not.toMatch(/level=ERROR/);
}, 120_000);

test("with TMPDIR full, a backup and an export (each on its worker's own connection) succeed", async () => {
  for (let i = 0; i < 30; i++) await admin.json("POST", "/api/admin/upload", form(await makePng(12, 12, 500 + i), `b${i}.png`));
  const snapshot = await admin.json<{ name: string; size: number }>("POST", "/api/admin/backups", undefined, 201);
  expect(snapshot.size).toBeGreaterThan(0);
  const exported = await admin.request("GET", "/api/admin/export");
  expect(exported.status).toBe(200);
  const body = (await exported.json()) as { images: { file_name: string }[] };
  expect(body.images.filter((i) => /^b\d+\.png$/.test(i.file_name))).toHaveLength(30);
  expect(server.logs).not.toMatch(/level=ERROR/);
}, 120_000);

test("with TMPDIR full, `kura check` and `kura backup` on the stopped service succeed", async () => {
  await server.stop();
  const check = await runCli(["check"], { KURA_DATA_DIR: dataDir, ...fullTmp });
  expect(check.code, check.out + check.err).toBe(0);
  const backup = await runCli(["backup"], { KURA_DATA_DIR: dataDir, ...fullTmp });
  expect(backup.code, backup.out + backup.err).toBe(0);
  server = await KuraServer.start({ dataDir, env: fullTmp });
}, 120_000);
