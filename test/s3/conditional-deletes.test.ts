/**
 * Conditional deletes, as AWS answers them since 2025: DeleteObject with `If-Match: <etag>` (or `*`)
 * deletes only the version it names (412 PreconditionFailed otherwise, 404 NoSuchKey on a free key),
 * and DeleteObjects honours a per-object `<ETag>` with a per-key `<Error>`. Conditions Kura cannot
 * evaluate are 501, never ignored (ignoring one deletes unconditionally).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DeleteObjectCommand, DeleteObjectsCommand, HeadObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { createHash } from "node:crypto";
import { makeJpeg } from "../helpers/images";
import { responseCodeOf, sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");
const B = "kura";

let f: S3Fixture;
let s3: S3Client;
const put = async (key: string, body: Uint8Array) => {
  const res = await signedRequest(f, "PUT", `/s3/${B}/${key}`, { body, headers: { "content-type": "image/jpeg" } });
  expect(res.status).toBe(200);
};
const exists = async (key: string) => (await signedRequest(f, "HEAD", `/s3/${B}/${key}`)).status === 200;
const failure = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { name: string; $metadata?: { httpStatusCode?: number } }) => `${e.$metadata?.httpStatusCode} ${e.name}`,
  );

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  s3 = sdkClient(f.cred);
});
afterAll(() => f.server.dispose());

describe("DeleteObject If-Match", () => {
  test("another ETag is 412 and the object stays; its own ETag deletes it", async () => {
    const [a, b] = await Promise.all([makeJpeg(40, 30, 9101), makeJpeg(40, 30, 9102)]);
    await put("cd/one.jpg", a);
    expect(await failure(s3.send(new DeleteObjectCommand({ Bucket: B, Key: "cd/one.jpg", IfMatch: `"${md5(b)}"` })))).toBe("412 PreconditionFailed");
    expect(await exists("cd/one.jpg")).toBe(true);
    // A bare ETag (the Java SDK v1's form) is compared like a quoted one.
    const bare = await signedRequest(f, "DELETE", `/s3/${B}/cd/one.jpg`, { headers: { "if-match": md5(b) } });
    expect([bare.status, await responseCodeOf(bare)]).toEqual([412, "PreconditionFailed"]);
    expect(await exists("cd/one.jpg")).toBe(true);
    expect(await failure(s3.send(new DeleteObjectCommand({ Bucket: B, Key: "cd/one.jpg", IfMatch: `"${md5(a)}"` })))).toBe("ok");
    expect(await exists("cd/one.jpg")).toBe(false);
  });

  test("`*` deletes whatever the key holds, and is 404 NoSuchKey on a free key (an unconditional delete stays 204)", async () => {
    await put("cd/star.jpg", await makeJpeg(40, 30, 9103));
    expect(await failure(s3.send(new DeleteObjectCommand({ Bucket: B, Key: "cd/star.jpg", IfMatch: "*" })))).toBe("ok");
    expect(await exists("cd/star.jpg")).toBe(false);
    const missing = await signedRequest(f, "DELETE", `/s3/${B}/cd/star.jpg`, { headers: { "if-match": "*" } });
    expect([missing.status, await responseCodeOf(missing)]).toEqual([404, "NoSuchKey"]);
    expect(await failure(s3.send(new DeleteObjectCommand({ Bucket: B, Key: "cd/none.jpg", IfMatch: '"0123456789abcdef0123456789abcdef"' })))).toBe(
      "404 NoSuchKey",
    );
    expect((await signedRequest(f, "DELETE", `/s3/${B}/cd/none.jpg`)).status).toBe(204);
  });

  test("a folder marker is deleted only with its ETag (the MD5 of nothing)", async () => {
    expect((await signedRequest(f, "PUT", `/s3/${B}/cd/dir/`)).status).toBe(200);
    const wrong = await signedRequest(f, "DELETE", `/s3/${B}/cd/dir/`, { headers: { "if-match": '"0123456789abcdef0123456789abcdef"' } });
    expect(wrong.status).toBe(412);
    expect(await exists("cd/dir/")).toBe(true);
    const right = await signedRequest(f, "DELETE", `/s3/${B}/cd/dir/`, { headers: { "if-match": '"d41d8cd98f00b204e9800998ecf8427e"' } });
    expect(right.status).toBe(204);
    expect(await exists("cd/dir/")).toBe(false);
  });

  test("conditions Kura cannot evaluate are 501 and delete nothing", async () => {
    await put("cd/keep.jpg", await makeJpeg(40, 30, 9104));
    const conditions: Record<string, string>[] = [
      { "if-none-match": "*" },
      { "x-amz-if-match-size": "1" },
      { "x-amz-if-match-last-modified-time": new Date().toUTCString() },
    ];
    for (const headers of conditions) {
      const res = await signedRequest(f, "DELETE", `/s3/${B}/cd/keep.jpg`, { headers });
      expect([res.status, await responseCodeOf(res)]).toEqual([501, "NotImplemented"]);
    }
    expect(await exists("cd/keep.jpg")).toBe(true);
  });
});

describe("DeleteObjects per-object ETag", () => {
  test("a matching ETag deletes, another is a PreconditionFailed <Error>, a free key NoSuchKey; keys without one are deleted as before", async () => {
    const [a, b, c] = await Promise.all([makeJpeg(40, 30, 9201), makeJpeg(40, 30, 9202), makeJpeg(40, 30, 9203)]);
    await Promise.all([put("cdm/a.jpg", a), put("cdm/b.jpg", b), put("cdm/c.jpg", c)]);
    const out = await s3.send(
      new DeleteObjectsCommand({
        Bucket: B,
        Delete: {
          Objects: [
            { Key: "cdm/a.jpg", ETag: `"${md5(a)}"` },
            { Key: "cdm/b.jpg", ETag: `"${md5(a)}"` },
            { Key: "cdm/gone.jpg", ETag: `"${md5(a)}"` },
            { Key: "cdm/c.jpg" },
          ],
        },
      }),
    );
    expect(out.Deleted?.map((d) => d.Key)).toEqual(["cdm/a.jpg", "cdm/c.jpg"]);
    expect(out.Errors?.map((e) => [e.Key, e.Code])).toEqual([
      ["cdm/b.jpg", "PreconditionFailed"],
      ["cdm/gone.jpg", "NoSuchKey"],
    ]);
    expect(await Promise.all(["cdm/a.jpg", "cdm/b.jpg", "cdm/c.jpg"].map(exists))).toEqual([false, true, false]);
    // Quiet still reports the refused keys.
    const quiet = await s3.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Quiet: true, Objects: [{ Key: "cdm/b.jpg", ETag: `"${md5(c)}"` }] } }));
    expect([quiet.Deleted, quiet.Errors?.map((e) => e.Code)]).toEqual([undefined, ["PreconditionFailed"]]);
    expect(await exists("cdm/b.jpg")).toBe(true);
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "cdm/b.jpg" }));
    expect(head.ETag).toBe(`"${md5(b)}"`);
  });

  test("<Size> and <LastModifiedTime> (directory buckets only on AWS) are a NotImplemented <Error>, nothing deleted", async () => {
    await put("cdm/sized.jpg", await makeJpeg(40, 30, 9204));
    const body = `<Delete><Object><Key>cdm/sized.jpg</Key><Size>1</Size></Object><Object><Key>cdm/sized.jpg</Key><LastModifiedTime>2026-01-01T00:00:00Z</LastModifiedTime></Object></Delete>`;
    const res = await signedRequest(f, "POST", `/s3/${B}/?delete=`, { body, headers: { "content-md5": createHash("md5").update(body).digest("base64") } });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect([...text.matchAll(/<Code>([^<]+)<\/Code>/g)].map((m) => m[1])).toEqual(["NotImplemented", "NotImplemented"]);
    expect(text).not.toContain("<Deleted>");
    expect(await exists("cdm/sized.jpg")).toBe(true);
  });
});
