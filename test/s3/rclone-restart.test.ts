/**
 * The upgrade scenario with the real rclone: `systemctl restart kura` while rclone copies a large file
 * in parts. The parts stored before the restart stay (src/s3/multipart-restart.ts), so rclone's retry of
 * the part the stop refused goes on with the same upload, and the copy succeeds without a second try
 * of the file (`--retries 1`: a NoSuchUpload after the restart failed it before). Kura listens on the
 * same fixed port across the restart, as a service does.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { noisePng, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { rcloneFor, type S3Credential, type S3Fixture, signedRequest } from "./s3-setup";
import { freePort } from "../helpers/ports";

let f: S3Fixture;
let dir: string;
let dataDir: string;
let listen: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-rclone-restart-"));
  dataDir = join(dir, "data");
  mkdirSync(dataDir);
  listen = `127.0.0.1:${freePort()}`;
  const server = await KuraServer.start({ dataDir, env: { KURA_LISTEN: listen } });
  const admin = await adminSession(server);
  const token = await admin.json("POST", "/api/admin/tokens", { name: "rclone-restart" }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  f = { server, admin, tokenId: token.id, cred };
});
afterAll(async () => {
  await f.server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Parts stored so far, over every open upload. */
const storedParts = () =>
  readdirSync(join(dataDir, "multipart"), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .reduce((n, e) => n + readdirSync(join(dataDir, "multipart", e.name)).length, 0);

test("rclone copyto in 5 MiB parts across a restart of Kura: the copy succeeds on its first try, bytes intact", async () => {
  const png = await noisePng(2400); // ~17 MiB: four parts
  const local = join(dir, "big.png");
  writeFileSync(local, png);
  // Retries as rclone's defaults give them (10): the part sent while no server listens is tried again.
  const rclone = rcloneFor(f, join(dir, "rclone.conf"), { lowLevelRetries: 10 });
  const copy = rclone([
    "copyto",
    "-vv",
    "--s3-upload-cutoff",
    "5M",
    "--s3-chunk-size",
    "5M",
    "--s3-upload-concurrency",
    "1",
    "--bwlimit",
    "3M",
    local,
    "k:kura/big/restart.png",
  ]);

  for (const deadline = Date.now() + 30_000; storedParts() < 2 && Date.now() < deadline; ) await Bun.sleep(20);
  expect(storedParts()).toBeGreaterThanOrEqual(2);
  await f.server.stop(); // a graceful stop: the part in flight may finish, the next one finds no listener
  f.server = await KuraServer.start({ dataDir, env: { KURA_LISTEN: listen } });
  expect(f.server.logs).toMatch(/未完成的 S3 分片上传已保留/);

  const done = await copy;
  expect(done.code, done.err).toBe(0);
  expect(done.err).toMatch(/Copied \(new\)/);
  // One upload from the first part to the last: no part refused, no second start from chunk 1.
  expect(done.err.match(/multipart upload starting chunk 1 /g), done.err).toHaveLength(1);
  expect(done.err).not.toMatch(/NoSuchUpload|Cancelling multipart upload/);
  const stored = await signedRequest(f, "GET", "/s3/kura/big/restart.png");
  expect(sha256(new Uint8Array(await stored.arrayBuffer()))).toBe(sha256(png));
  expect(readdirSync(join(dataDir, "multipart"))).toEqual([]);
}, 120_000);
