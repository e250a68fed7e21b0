/**
 * Deleting a user removes their open S3 multipart uploads with them (authorization audit LOW-3): the rows
 * went with the user (foreign key), and the staged part files stayed on disk, counted nowhere, until a restart.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { s3User, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

let f: S3Fixture;
beforeAll(async () => {
  f = await startS3Fixture();
});
afterAll(() => f.server.dispose());

test("a deleted user's staged parts are removed with the user; other users' uploads stay", async () => {
  const gone = await s3User(f, "leaving");
  const staged = async (cred: typeof gone.cred, key: string) => {
    const created = await signedRequest(f, "POST", `/s3/kura/${key}?uploads=`, { cred });
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())![1]!;
    const part = await signedRequest(f, "PUT", `/s3/kura/${key}?partNumber=1&uploadId=${uploadId}`, { cred, body: new Uint8Array(4096).fill(7) });
    expect(part.status).toBe(200);
    return join(f.server.dataDir, "multipart", uploadId);
  };
  const leaving = [await staged(gone.cred, "a.png"), await staged(gone.cred, "b.png")];
  const staying = await staged(f.cred, "c.png");
  for (const dir of [...leaving, staying]) expect(readdirSync(dir).length).toBe(1);
  expect((await f.admin.request("DELETE", `/api/admin/users/${gone.userId}`)).status).toBe(204);
  expect(leaving.map(existsSync)).toEqual([false, false]);
  expect(readdirSync(staying).length).toBe(1);
});
