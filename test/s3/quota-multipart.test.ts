/**
 * Staged and arriving multipart bytes count against the user's quota from the first byte, for every
 * write: PutObject, CopyObject and the native `POST /api/upload` are refused (403) while open uploads
 * hold the room they would need, and go through once the upload is aborted. A Complete whose own parts
 * fill the quota still completes: its staged bytes become the object and are not counted twice.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { PausePoints } from "../helpers/pause-points";
import { responseCodeOf, s3User, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

let f: S3Fixture;
const pauses = new PausePoints();
beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 }, pauses.env("upload.commit"));
});
afterAll(() => f.server.dispose());

type User = Awaited<ReturnType<typeof s3User>>;

async function setQuota(user: User, quota: number) {
  const row = (await f.admin.json("GET", "/api/admin/users?page_size=100")).items.find((u: { id: string }) => u.id === user.userId);
  await f.admin.json("PUT", `/api/admin/users/${user.userId}`, {
    name: row.name,
    role: row.role,
    quota_bytes: Math.floor(quota),
    default_ttl_hours: row.default_ttl_hours,
    disabled: row.disabled,
  });
}

const s3 = (user: User, method: string, path: string, opts: { body?: Uint8Array; headers?: Record<string, string> } = {}) =>
  signedRequest(f, method, `/s3/kura/${path}`, { ...opts, cred: user.cred });

/** Opens an upload of `key` and stages one part of `bytes`; resolves the upload id and the part's ETag. */
async function stage(user: User, key: string, bytes: Uint8Array): Promise<{ uploadId: string; etag: string }> {
  const created = await s3(user, "POST", `${key}?uploads=`);
  const uploadId = /<UploadId>([^<]+)</.exec(await created.text())?.[1];
  if (!uploadId) throw new Error(`CreateMultipartUpload: ${created.status}`);
  const part = await s3(user, "PUT", `${key}?partNumber=1&uploadId=${uploadId}`, { body: bytes });
  expect(part.status).toBe(200);
  return { uploadId, etag: part.headers.get("etag")! };
}

const abort = async (user: User, key: string, uploadId: string) => expect((await s3(user, "DELETE", `${key}?uploadId=${uploadId}`)).status).toBe(204);

/** Room the tests leave: far more than any difference between a JPEG sent and stored. */
const PART = 20_000;

describe("open multipart uploads take room from every write", () => {
  test("PutObject is 403 AccessDenied while staged parts hold the room, 200 once the upload is aborted", async () => {
    const user = await s3User(f, "quota-put");
    const jpeg = await makeJpeg(40, 30, 9401);
    // Room for the part or for the image, not for both.
    await setQuota(user, PART + jpeg.length / 2);
    const { uploadId } = await stage(user, "staged.bin", new Uint8Array(PART));
    const refused = await s3(user, "PUT", "a.jpg", { body: jpeg });
    expect([refused.status, await responseCodeOf(refused)]).toEqual([403, "AccessDenied"]);
    expect((await s3(user, "HEAD", "a.jpg")).status).toBe(404);
    await abort(user, "staged.bin", uploadId);
    expect((await s3(user, "PUT", "a.jpg", { body: jpeg })).status).toBe(200);
  });

  test("CopyObject is 403 while staged parts hold the room", async () => {
    const user = await s3User(f, "quota-copy");
    const jpeg = await makeJpeg(40, 30, 9402);
    expect((await s3(user, "PUT", "src.jpg", { body: jpeg })).status).toBe(200);
    // Room for one more copy of the image, or for the staged part, not for both.
    await setQuota(user, PART + 1.5 * jpeg.length);
    const { uploadId } = await stage(user, "staged.bin", new Uint8Array(PART));
    const copy = () => s3(user, "PUT", "copy.jpg", { headers: { "x-amz-copy-source": "kura/src.jpg" } });
    const refused = await copy();
    expect([refused.status, await responseCodeOf(refused)]).toEqual([403, "AccessDenied"]);
    expect((await s3(user, "HEAD", "copy.jpg")).status).toBe(404);
    await abort(user, "staged.bin", uploadId);
    expect((await copy()).status).toBe(200);
  });

  test("the native POST /api/upload is 403 while staged parts hold the room", async () => {
    const user = await s3User(f, "quota-native");
    const jpeg = await makeJpeg(40, 30, 9403);
    await setQuota(user, PART + jpeg.length / 2);
    const { uploadId } = await stage(user, "staged.bin", new Uint8Array(PART));
    const upload = () => fetch(f.server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${user.token}` }, body: form(jpeg, "n.jpg") });
    const refused = await upload();
    expect(refused.status).toBe(403);
    await refused.text();
    await abort(user, "staged.bin", uploadId);
    const stored = await upload();
    expect(stored.status).toBe(200);
    await stored.text();
  });

  test("a Complete whose own parts fill the quota completes: its staged bytes are not counted twice", async () => {
    const user = await s3User(f, "quota-complete");
    const jpeg = await makeJpeg(40, 30, 9404);
    await setQuota(user, jpeg.length);
    const { uploadId, etag } = await stage(user, "whole.jpg", jpeg);
    const body = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>`;
    const done = await s3(user, "POST", `whole.jpg?uploadId=${uploadId}`, { body: new TextEncoder().encode(body) });
    expect([done.status, (await done.text()).includes("<CompleteMultipartUploadResult")]).toEqual([200, true]);
    // Full now: nothing else fits.
    const more = await s3(user, "PUT", "more.jpg", { body: await makeJpeg(40, 30, 9405) });
    expect([more.status, await responseCodeOf(more)]).toEqual([403, "AccessDenied"]);
  });

  test("while a Complete stores its parts, they still take room from the user's other writes", async () => {
    const user = await s3User(f, "quota-during-complete");
    const jpeg = await makeJpeg(40, 30, 9406);
    const other = await makeJpeg(40, 30, 9407);
    // Room for the completed object or the other image, not both.
    await setQuota(user, jpeg.length + other.length / 2);
    const { uploadId, etag } = await stage(user, "held.jpg", jpeg);
    const body = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>`;
    // The Complete is parked in its commit (its bytes written, its reference not yet): a PutObject then must not pass.
    const done = await pauses.during(
      "upload.commit",
      sha256(jpeg),
      () => s3(user, "POST", `held.jpg?uploadId=${uploadId}`, { body: new TextEncoder().encode(body) }),
      async () => {
        const meanwhile = await s3(user, "PUT", "other.jpg", { body: other });
        expect([meanwhile.status, await responseCodeOf(meanwhile)]).toEqual([403, "AccessDenied"]);
      },
    );
    expect(done.status).toBe(200);
    expect((await s3(user, "HEAD", "other.jpg")).status).toBe(404);
  });
});
