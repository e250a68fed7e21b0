/**
 * rclone against the one-bucket rule and the multipart housekeeping commands (issue 11): a sync to a
 * mistyped bucket name fails with NoSuchBucket and deletes nothing; `backend list-multipart-uploads`
 * lists abandoned uploads and `cleanup` aborts the old ones.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeJpeg } from "../helpers/images";
import { rcloneFor, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

describe("rclone: bucket safety and multipart housekeeping", () => {
  let f: S3Fixture;
  let dir: string;
  let rclone: ReturnType<typeof rcloneFor>;
  const keys = async () => (await rclone(["lsf", "-R", "--files-only", "k:kura"])).out.split("\n").filter(Boolean).sort();

  beforeAll(async () => {
    f = await startS3Fixture();
    dir = mkdtempSync(join(tmpdir(), "kura-rclone-safety-"));
    rclone = rcloneFor(f, join(dir, "rclone.conf"));
    const library = join(dir, "library");
    mkdirSync(library);
    for (let i = 0; i < 3; i++) writeFileSync(join(library, `shot${i}.jpg`), await makeJpeg(30, 30, 60 + i));
    const copied = await rclone(["copy", library, "k:kura/shots"]);
    expect(copied.code).toBe(0);
  });
  afterAll(async () => {
    await f.server.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("sync to a wrong bucket name fails with NoSuchBucket and deletes nothing (also with --dry-run)", async () => {
    const before = await keys();
    expect(before).toEqual(["shots/shot0.jpg", "shots/shot1.jpg", "shots/shot2.jpg"]);
    const other = join(dir, "other");
    mkdirSync(other, { recursive: true });
    writeFileSync(join(other, "new.jpg"), await makeJpeg(20, 20, 70));
    for (const target of ["k:screenshots", "k:screenshots/shots", "k:Kura/shots"]) {
      // A dry run sees an empty (missing) destination: it would only copy, never delete anything.
      const dry = await rclone(["sync", "-v", "--dry-run", other, target]);
      expect(dry.err).not.toMatch(/shot\d\.jpg/);
      expect(dry.err).not.toMatch(/Skipped delete/);
      const real = await rclone(["sync", "-v", other, target]);
      expect(real.code).not.toBe(0);
      expect(real.err).toContain("NoSuchBucket");
      expect(real.err).not.toMatch(/Deleted|shot\d\.jpg/);
    }
    expect(await keys()).toEqual(before);
    expect((await f.admin.json("GET", "/api/admin/images?page_size=1")).total).toBe(3);
  });

  test("backend list-multipart-uploads lists open uploads; cleanup aborts those older than a day", async () => {
    const created = await (await signedRequest(f, "POST", "/s3/kura/big/abandoned.jpg?uploads=")).text();
    const oldId = /<UploadId>([^<]+)</.exec(created)![1]!;
    expect((await signedRequest(f, "PUT", `/s3/kura/big/abandoned.jpg?partNumber=1&uploadId=${oldId}`, { body: new Uint8Array(2048) })).status).toBe(200);
    const freshId = /<UploadId>([^<]+)</.exec(await (await signedRequest(f, "POST", "/s3/kura/big/fresh.jpg?uploads=")).text())![1]!;

    const listed = await rclone(["backend", "list-multipart-uploads", "k:kura"]);
    expect(listed.code).toBe(0);
    const uploads = JSON.parse(listed.out).kura as { Key: string; UploadId: string }[];
    expect(uploads.map((u) => [u.Key, u.UploadId]).sort()).toEqual([
      ["big/abandoned.jpg", oldId],
      ["big/fresh.jpg", freshId],
    ]);

    // rclone cleanup aborts uploads initiated more than 24 hours ago.
    const db = new Database(join(f.server.dataDir, "kura.db"));
    db.query("UPDATE multipart_uploads SET created_at = datetime('now', '-25 hours') WHERE upload_id = ?").run(oldId);
    db.close();
    const cleaned = await rclone(["cleanup", "-v", "k:kura"]);
    expect(cleaned.code).toBe(0);
    const after = JSON.parse((await rclone(["backend", "list-multipart-uploads", "k:kura"])).out).kura as { UploadId: string }[];
    expect(after.map((u) => u.UploadId)).toEqual([freshId]);
    expect(await keys()).toEqual(["shots/shot0.jpg", "shots/shot1.jpg", "shots/shot2.jpg"]);
  });
});
