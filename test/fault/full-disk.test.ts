/**
 * Fault tier: a full file system, for real (a small tmpfs filled to the last byte). Uploads must
 * answer a clear Chinese error, leave nothing half-written (no image row without bytes, no
 * object without a row, no temp file), reads keep working, and uploads work again once space
 * returns.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { adminSession, expectError } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitReplicaState } from "../http/channels.helpers";
import { sdkClient } from "../s3/s3-setup";
import { CompleteMultipartUploadCommand, CreateMultipartUploadCommand, GetObjectCommand, PutObjectCommand, UploadPartCommand } from "@aws-sdk/client-s3";
import { fillDisk, mountTmpfs } from "./harness";

/** A JPEG of noise: it does not compress, so its size is predictable (~300 KB at 400x300, ~4.5 MB at 2400x1800). */
const noiseJpeg = (seed: number, width = 400, height = 300) => {
  const raw = Buffer.alloc(width * height * 3);
  let x = seed * 2654435761;
  for (let i = 0; i < raw.length; i++) raw[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .withExif({ IFD0: { ImageDescription: "kura" } })
    .jpeg({ quality: 95 })
    .toBuffer();
};

const mounts: { unmount: () => void }[] = [];
afterAll(() => {
  for (const m of mounts) m.unmount();
});

function dbRows(dataDir: string) {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  try {
    return {
      images: db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM images").get()!.n,
      blobs: db
        .query<{ storage_key: string }, []>("SELECT storage_key FROM blobs")
        .all()
        .map((b) => b.storage_key),
      intents: db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM upload_intents").get()!.n,
    };
  } finally {
    db.close();
  }
}

describe("full file systems", () => {
  test("data dir on a full disk: clear Chinese error, nothing half-written, reads work, recovery when space returns", async () => {
    const fs = mountTmpfs(12);
    mounts.push(fs);
    const server = await KuraServer.start({ dataDir: fs.dir });
    try {
      const admin = await adminSession(server);
      const first = await makeJpeg(120, 90, 1);
      const { id } = await admin.json("POST", "/api/admin/upload", form(first, "before.jpg", { exif_policy: "passthrough" }));
      const before = dbRows(fs.dir);

      const filler = fillDisk(fs.dir);
      const big = await noiseJpeg(2);
      const refused = await admin.request("POST", "/api/admin/upload", form(big, "full.jpg"));
      // A full disk is the server's temporary condition: a retryable 503 that says so, not a 500.
      expect(refused.headers.get("retry-after")).not.toBeNull();
      expect(await expectError(refused, 503)).toContain("存储空间不足");

      // Nothing half-written: same rows, every blob has its object and no object lacks a blob, no temp file.
      const after = dbRows(fs.dir);
      expect(after.images).toBe(before.images);
      expect(after.blobs.sort()).toEqual(before.blobs.sort());
      expect(after.intents).toBe(0);
      expect(
        listFiles(join(fs.dir, "storage"))
          .filter((f) => f.startsWith("img/"))
          .sort(),
      ).toEqual(before.blobs.sort());
      expect(readdirSync(join(fs.dir, "tmp"))).toEqual([]);

      // Reads keep working on a full disk.
      const read = await fetch(server.url(`/i/${id}`));
      expect(read.status).toBe(200);
      expect(Buffer.from(await read.arrayBuffer()).equals(first)).toBe(true);
      expect((await admin.request("GET", "/api/admin/images")).status).toBe(200);

      // Space returns: the same upload goes through.
      rmSync(filler);
      const ok = await admin.json("POST", "/api/admin/upload", form(big, "full.jpg", { exif_policy: "passthrough" }));
      const back = await fetch(server.url(`/i/${ok.id}`));
      expect(Buffer.from(await back.arrayBuffer()).equals(big)).toBe(true);
      expect(server.logs).not.toMatch(/level=ERROR msg=请求处理失败/);
      await server.waitForLog(/level=ERROR msg=磁盘空间不足/); // the operator hears about it
    } finally {
      await server.dispose();
    }
  });

  test("a part arriving on a nearly full disk is never kept truncated: UploadPart is 503, nothing staged; with space back the same part completes byte-identical", async () => {
    const fs = mountTmpfs(16);
    mounts.push(fs);
    const server = await KuraServer.start({ dataDir: fs.dir });
    try {
      const admin = await adminSession(server);
      const created = await admin.json("POST", "/api/admin/tokens", { name: "parts" }, 201);
      const cred = await admin.json("POST", `/api/admin/tokens/${created.id}/s3-credential`);
      const s3 = sdkClient(cred);
      const body = await noiseJpeg(13);
      const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket: cred.bucket, Key: "part.jpg", ContentType: "image/jpeg" }));
      // Less room than the part: the write of its body comes up short (without an error) before it fails.
      const filler = fillDisk(fs.dir, Math.floor(body.length * 0.8));
      const part = () => s3.send(new UploadPartCommand({ Bucket: cred.bucket, Key: "part.jpg", UploadId: upload.UploadId, PartNumber: 1, Body: body }));
      const refused = await part().catch((e) => e);
      expect(refused).toMatchObject({ name: "ServiceUnavailable", $metadata: { httpStatusCode: 503 } });
      expect(listFiles(join(fs.dir, "tmp")).filter((f) => f.startsWith("multipart/"))).toEqual([]);
      rmSync(filler);
      const { ETag } = await part();
      await s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: cred.bucket,
          Key: "part.jpg",
          UploadId: upload.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] },
        }),
      );
      const got = await s3.send(new GetObjectCommand({ Bucket: cred.bucket, Key: "part.jpg" }));
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    } finally {
      await server.dispose();
    }
  });

  test("a URL import and a large upload whose stripped copy does not fit answer the disk-full 503, not a 400 or 415", async () => {
    const fs = mountTmpfs(24);
    mounts.push(fs);
    const image = await noiseJpeg(21);
    const origin = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response(new Uint8Array(image), { headers: { "content-type": "image/jpeg" } }),
    });
    const server = await KuraServer.start({ dataDir: fs.dir, env: { KURA_IMPORT_ALLOW: "127.0.0.1/32" } });
    try {
      const admin = await adminSession(server);
      const expectDiskFull = async (res: Response) => {
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).not.toBeNull();
        expect(await expectError(res, 503)).toContain("存储空间不足");
      };
      const filler = fillDisk(fs.dir);
      // Our disk is full, the origin is fine: before, "无法从该 URL 下载文件" (400).
      await expectDiskFull(await admin.request("POST", "/api/admin/upload/url", { url: `http://127.0.0.1:${origin.port}/a.jpg` }));
      rmSync(filler);

      // Over 4 MiB it streams to a temp file; room for that file but not for its stripped copy.
      const big = await noiseJpeg(22, 2400, 1800);
      expect(big.length).toBeGreaterThan(4 * 1024 * 1024);
      const tight = fillDisk(fs.dir, Math.round(big.length * 1.5));
      // Before, "不支持的图片格式" (415) for a valid JPEG.
      await expectDiskFull(await admin.request("POST", "/api/admin/upload", form(big, "big.jpg", { exif_policy: "strip" })));
      expect(readdirSync(join(fs.dir, "tmp"))).toEqual([]);
      rmSync(tight);
      expect((await admin.request("POST", "/api/admin/upload", form(big, "big.jpg", { exif_policy: "strip" }))).status).toBe(200);
      expect(server.logs).not.toMatch(/level=ERROR msg=请求处理失败/);
    } finally {
      origin.stop(true);
      await server.dispose();
    }
  });

  test.each([
    // Nothing fits: the database may be unable to record the alert either, so the answer may be the
    // general disk-full one; what must hold is a 503 with Retry-After and no marker left behind.
    ["not even the in-progress marker fits", 0, false],
    ["the marker fits, the snapshot does not", 16_384, true],
  ])("a backup on a full disk (%s): 503 with a disk-full reason and Retry-After, no marker left", async (_, leave, alertFits) => {
    const fs = mountTmpfs(16);
    mounts.push(fs);
    const server = await KuraServer.start({ dataDir: fs.dir });
    try {
      const admin = await adminSession(server);
      const filler = fillDisk(fs.dir, leave);
      const res = await admin.request("POST", "/api/admin/backups");
      expect(res.headers.get("retry-after")).toBe("60");
      expect(await expectError(res, 503)).toMatch(/^(生成数据库快照失败：磁盘空间不足|服务器存储空间不足)/);
      if (alertFits) {
        const alerts = (await admin.json("GET", "/api/admin/alerts")).items as { kind: string }[];
        expect(alerts.map((a) => a.kind)).toContain("backup_failed");
        expect(server.logs).toMatch(/level=(ERROR|WARN) msg=元数据备份失败/);
      }
      // No marker: the next start must not take a backup "left unfinished".
      expect(readdirSync(fs.dir).filter((f) => f.includes("backup"))).toEqual([]);
      rmSync(filler);
      expect((await admin.request("POST", "/api/admin/backups")).status).toBeLessThan(300);
    } finally {
      await server.dispose();
    }
  });

  test("a channel on a full disk: uploads fail over, the replica fails with a Chinese reason, nothing half-written, retried when space returns", async () => {
    const fs = mountTmpfs(4);
    mounts.push(fs);
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      const channelDir = join(fs.dir, "channel");
      const full = await admin.json("POST", "/api/admin/channels", { name: "small-disk", driver: "local", config: { path: channelDir }, priority: 50 }, 201);
      const filler = fillDisk(fs.dir);
      const bytes = await noiseJpeg(3);

      // The best channel cannot take it: the upload is written to the next one and still succeeds.
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "fo.jpg", { exif_policy: "passthrough" }));
      const failed = await waitReplicaState(admin, id, full.id, "failed");
      expect(failed!.last_error).toMatch(/[\u4e00-\u9fff]/);
      expect(listFiles(channelDir).filter((f) => !f.startsWith("_kura/"))).toEqual([]); // no partial object left behind
      expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);

      // With two copies required and only one possible, the upload is refused clearly and undone.
      // (The database has room here: only the channel's write meets the full disk.)
      await admin.json("PUT", "/api/admin/config", { min_success: 2 });
      const before = dbRows(server.dataDir);
      const refused = await admin.request("POST", "/api/admin/upload", form(await noiseJpeg(4), "two.jpg"));
      // The copy that could not be made stopped on a full disk, so that is what the client hears.
      expect(refused.headers.get("retry-after")).not.toBeNull();
      expect(await expectError(refused, 503)).toContain("存储空间不足");
      // The same on every upload surface, each in its own envelope, and the operator hears about it.
      const created = await admin.json("POST", "/api/admin/tokens", { name: "full" }, 201);
      const token = created.token as string;
      const lsky = new FormData();
      lsky.append("file", new Blob([new Uint8Array(await noiseJpeg(5))]), "lsky.jpg");
      const lskyRes = await fetch(server.url("/api/v1/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: lsky });
      // Lsky answers a failed upload with HTTP 200 and status false (its clients show the message only then).
      expect(lskyRes.status).toBe(200);
      expect(lskyRes.headers.get("retry-after")).not.toBeNull();
      expect(await lskyRes.json()).toMatchObject({ status: false, message: expect.stringContaining("存储空间不足") });
      const chevereto = new FormData();
      chevereto.append("key", token);
      chevereto.append("source", new Blob([new Uint8Array(await noiseJpeg(6))]), "chevereto.jpg");
      const cheveretoRes = await fetch(server.url("/api/1/upload"), { method: "POST", body: chevereto });
      expect(cheveretoRes.status).toBe(503);
      expect(cheveretoRes.headers.get("retry-after")).not.toBeNull();
      expect(await cheveretoRes.json()).toMatchObject({ status_code: 503, error: { message: expect.stringContaining("存储空间不足") } });
      const cred = await admin.json("POST", `/api/admin/tokens/${created.id}/s3-credential`);
      const s3 = sdkClient(cred);
      const put = await s3
        .send(new PutObjectCommand({ Bucket: cred.bucket, Key: "full.jpg", Body: await noiseJpeg(7), ContentType: "image/jpeg" }))
        .catch((e) => e);
      expect(put).toMatchObject({ name: "ServiceUnavailable", $metadata: { httpStatusCode: 503 } });
      expect(put.message).toContain("存储空间不足");
      const logged = server.logs.match(/level=ERROR msg=磁盘空间不足/g)?.length ?? 0;
      expect(logged).toBeGreaterThanOrEqual(4);
      expect(server.logs).not.toMatch(/level=ERROR msg=请求处理失败/);
      const after = dbRows(server.dataDir);
      expect(after.images).toBe(before.images);
      expect(after.intents).toBe(0);
      expect(
        listFiles(join(server.dataDir, "storage"))
          .filter((f) => f.startsWith("img/"))
          .sort(),
      ).toEqual(after.blobs.sort());
      await admin.json("PUT", "/api/admin/config", { min_success: 1 });

      // Space returns: a check makes the channel healthy and the failed replica is written.
      rmSync(filler);
      await admin.json("POST", `/api/admin/channels/${full.id}/check`);
      await waitReplicaState(admin, id, full.id, "done", 15_000);
      const stored = listFiles(channelDir).filter((f) => f.startsWith("img/"));
      expect(stored.length).toBe(1);
      expect(Buffer.from(await Bun.file(join(channelDir, stored[0]!)).bytes()).equals(bytes)).toBe(true);
    } finally {
      await server.dispose();
    }
  });
});
