/**
 * Fault tier: an S3 part acknowledged with 200 is whole after the disk fails right after it. Parts
 * are kept across restarts (src/s3/multipart-restart.ts), so the file under the part's MD5 name is
 * what Complete assembles: written without fsync, ext4 (delayed allocation) can bring it back empty
 * after the fault, and Complete would store a wrong object under a multipart ETag that looks right.
 * Real ext4, made to fail by its own trigger (harness.ts), repaired with fsck as an operator would.
 */
import { afterAll, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { makePng } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { type S3Credential, type S3Fixture, signedRequest } from "../s3/s3-setup";
import { kuraOnFailableDisk, type mountFailableExt4 } from "./harness";

const disks: ReturnType<typeof mountFailableExt4>[] = [];
afterAll(() => {
  for (const disk of disks) disk.unmount();
});

const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");

test("a part acknowledged just before the disk fails is whole after fsck, and completes into the right object", async () => {
  const started = await kuraOnFailableDisk(disks);
  const { disk, dataDir, admin } = started;
  let server = started.server;
  const token = await admin.json("POST", "/api/admin/tokens", { name: "s3-fault" }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  const f: S3Fixture = { server, admin, tokenId: token.id, cred };
  const key = "fault/part.png";
  const created = await signedRequest(f, "POST", `/s3/kura/${key}?uploads=`);
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())![1]!;
  const png = await makePng(1200, 900, 3);
  const part = Buffer.concat([png, randomBytes(3 * 1024 * 1024 - png.length)]);
  const acked = await signedRequest(f, "PUT", `/s3/kura/${key}?partNumber=1&uploadId=${uploadId}`, { body: part });
  expect(acked.status).toBe(200);

  disk.fail();
  await server.stop("SIGKILL");
  disk.repair();
  server = await KuraServer.start({ dataDir });
  f.server = server;
  try {
    const body = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"${md5(part)}"</ETag></Part></CompleteMultipartUpload>`;
    const completed = await signedRequest(f, "POST", `/s3/kura/${key}?uploadId=${uploadId}`, { body });
    expect(completed.status, await completed.clone().text()).toBe(200);
    const stored = await signedRequest(f, "GET", `/s3/kura/${key}`);
    expect(md5(new Uint8Array(await stored.arrayBuffer()))).toBe(md5(part));
  } finally {
    await server.stop("SIGKILL");
  }
}, 90_000);
