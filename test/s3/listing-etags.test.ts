/**
 * A listing never reads object bytes (audit 10 MED-1): it hashed every object uploaded through
 * `/api/upload` (no stored MD5) on the event loop, 0.6-0.9 s per 1,000 keys, and one unreadable blob
 * answered the whole listing 500. Now the upload keeps the MD5, so such an object lists with its true
 * MD5 ETag even with its bytes gone; an old row without one lists with a multipart-style stand-in
 * (`"<hex>-1"`, which rclone does not compare as an MD5) while a background pass fills the MD5 in, and
 * an unreadable one is logged and never fails the listing.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeJpeg } from "../helpers/images";
import { signedRequest, startS3Fixture, writeRcloneS3Config, type S3Fixture } from "./s3-setup";

let f: S3Fixture;
let token: string;

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  token = (await f.admin.json("POST", "/api/admin/tokens", { name: "form-uploads" }, 201)).token;
});
afterAll(() => f.server.dispose());

const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");

/** POST /api/upload with an object_key (the console's and PicGo-web's path): the key is an S3 object of the same user. */
async function formUpload(bytes: Uint8Array, key: string) {
  const body = new FormData();
  body.append("file", new Blob([new Uint8Array(bytes)], { type: "image/jpeg" }), "x.jpg");
  body.append("object_key", key);
  body.append("exif_policy", "passthrough");
  const res = await fetch(f.server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body });
  expect(res.status, await res.clone().text()).toBe(200);
}

/** Every stored blob file of the default local channel (what a listing would have to read). */
function blobFiles(dir = join(f.server.dataDir, "storage")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? blobFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

async function etags(prefix: string): Promise<Record<string, string>> {
  const res = await signedRequest(f, "GET", `/s3/kura?list-type=2&prefix=${encodeURIComponent(prefix)}`);
  const xml = await res.text();
  expect(res.status, xml).toBe(200);
  const out: Record<string, string> = {};
  for (const m of xml.matchAll(/<Contents><Key>([^<]*)<\/Key>.*?<ETag>&quot;([^&]*)&quot;<\/ETag>/g)) out[m[1]!] = m[2]!;
  return out;
}

test("objects uploaded through /api/upload list with their true MD5 ETag, read from the database, not from their bytes", async () => {
  const images = await Promise.all([1, 2, 3].map((seed) => makeJpeg(40, 30, 60 + seed)));
  for (const [i, bytes] of images.entries()) await formUpload(bytes, `form/${i}.jpg`);
  // The bytes are gone: a listing that hashed them would answer 500.
  for (const file of blobFiles()) rmSync(file);
  expect(await etags("form/")).toEqual(Object.fromEntries(images.map((bytes, i) => [`form/${i}.jpg`, md5(bytes)])));
});

test("an old object without a stored MD5 lists with a stand-in ETag at once, then with its MD5 from the background pass; an unreadable one never fails the listing", async () => {
  const readable = await makeJpeg(40, 30, 77);
  const lost = await makeJpeg(40, 30, 78);
  const before = new Set(blobFiles());
  await formUpload(readable, "old/readable.jpg");
  await formUpload(lost, "old/lost.jpg");
  const lostFile = blobFiles().find((file) => !before.has(file) && Bun.file(file).size === lost.length);
  expect(lostFile).toBeDefined();
  rmSync(lostFile!);
  forgetMd5s("old/");

  const first = await etags("old/");
  expect(Object.keys(first).sort()).toEqual(["old/lost.jpg", "old/readable.jpg"]);
  for (const etag of Object.values(first)) expect(etag).toMatch(/^[0-9a-f]{32}-1$/);

  // The background pass hashes the readable one; the lost one keeps its stand-in and is logged.
  const deadline = Date.now() + 10_000;
  let now = first;
  while (now["old/readable.jpg"] !== md5(readable) && Date.now() < deadline) {
    await Bun.sleep(50);
    now = await etags("old/");
  }
  expect(now["old/readable.jpg"]).toBe(md5(readable));
  expect(now["old/lost.jpg"]).toMatch(/^[0-9a-f]{32}-1$/);
  await f.server.waitForLog(/S3 对象的 MD5 暂时无法计算/);
});

/** Forgets the stored MD5s under `prefix`, as for rows stored before uploads kept them. */
function forgetMd5s(prefix: string) {
  const db = new Database(join(f.server.dataDir, "kura.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.query("UPDATE blobs SET md5 = '' WHERE id IN (SELECT blob_id FROM images WHERE substr(object_key, 1, length(?)) = ?)").run(prefix, prefix);
  } finally {
    db.close();
  }
}

test("rclone md5sum and check agree with the local files while the listing still carries stand-in ETags (rclone asks HEAD instead)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-etag-rclone-"));
  try {
    const local = join(dir, "files");
    mkdirSync(local);
    const sums: string[] = [];
    for (const seed of [81, 82]) {
      const bytes = await makeJpeg(40, 30, seed);
      writeFileSync(join(local, `${seed}.jpg`), bytes);
      await formUpload(bytes, `rc/${seed}.jpg`);
      sums.push(`${md5(bytes)}  ${seed}.jpg`);
    }
    forgetMd5s("rc/");
    const config = join(dir, "rclone.conf");
    writeRcloneS3Config(f, config);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "AWS_CA_BUNDLE" && !k.startsWith("RCLONE_")) env[k] = v;
    const rclone = async (...args: string[]) => {
      const proc = Bun.spawn(["timeout", "30", "rclone", "--config", config, "--retries", "1", "--low-level-retries", "1", ...args], {
        env,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      return { code: await proc.exited, out, err };
    };
    const listed = await etags("rc/");
    for (const etag of Object.values(listed)) expect(etag).toMatch(/^[0-9a-f]{32}-1$/);
    forgetMd5s("rc/"); // the listing above queued the background pass: rclone must meet the stand-ins too
    const sum = await rclone("md5sum", "k:kura/rc");
    expect(sum.code, sum.err).toBe(0);
    expect(sum.out.trim().split("\n").sort()).toEqual(sums.sort());
    forgetMd5s("rc/");
    const check = await rclone("check", local, "k:kura/rc");
    expect(check.code, check.err).toBe(0);
    expect(check.err).toMatch(/0 differences found/);
    expect(check.err).toMatch(/2 matching files/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
