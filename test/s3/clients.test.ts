/**
 * The S3 traps real clients hit (issue 11): conditional requests, folder markers, SigV2 signatures,
 * superseded images in the cleanup review, browser-form POST policy uploads (built as boto3's
 * generate_presigned_post builds them) and ListMultipartUploads through the AWS SDK.
 */
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { makeJpeg, makePng, sha256 } from "../helpers/images";
import { responseCodeOf as codeOf, sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();

describe("S3 client gaps", () => {
  let f: S3Fixture;
  let jpeg: Buffer;
  beforeAll(async () => {
    f = await startS3Fixture();
    jpeg = await makeJpeg(48, 32, 11);
  });
  afterAll(() => f.server.dispose());

  test("conditional HEAD/GET: If-None-Match and If-Modified-Since answer 304, If-Match mismatch 412", async () => {
    expect((await signedRequest(f, "PUT", "/s3/kura/cond.jpg", { body: jpeg })).status).toBe(200);
    const head = await signedRequest(f, "HEAD", "/s3/kura/cond.jpg");
    const etag = head.headers.get("etag")!;
    const modified = head.headers.get("last-modified")!;
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    for (const method of ["HEAD", "GET"]) {
      const notModified = await signedRequest(f, method, "/s3/kura/cond.jpg", { headers: { "if-none-match": etag } });
      expect(notModified.status).toBe(304);
      expect(notModified.headers.get("etag")).toBe(etag);
      expect((await notModified.arrayBuffer()).byteLength).toBe(0);
      expect((await signedRequest(f, method, "/s3/kura/cond.jpg", { headers: { "if-modified-since": modified } })).status).toBe(304);
    }
    expect((await signedRequest(f, "HEAD", "/s3/kura/cond.jpg", { headers: { "if-none-match": '"0123456789abcdef0123456789abcdef"' } })).status).toBe(200);
    const older = new Date(Date.parse(modified) - 3600_000).toUTCString();
    const changed = await signedRequest(f, "GET", "/s3/kura/cond.jpg", { headers: { "if-modified-since": older } });
    expect(changed.status).toBe(200);
    expect(sha256(new Uint8Array(await changed.arrayBuffer()))).toBe(sha256(jpeg));
    const mismatch = await signedRequest(f, "GET", "/s3/kura/cond.jpg", { headers: { "if-match": '"0123456789abcdef0123456789abcdef"' } });
    expect(mismatch.status).toBe(412);
    expect(await codeOf(mismatch)).toBe("PreconditionFailed");
  });

  test("zero-byte keys ending in / are folder markers: listed, HEAD 200 with no bytes, never an image; content is refused", async () => {
    const before = (await f.admin.json("GET", "/api/admin/images?page_size=1")).total;
    expect((await signedRequest(f, "PUT", "/s3/kura/newfolder/", { body: "" })).status).toBe(200);
    expect((await signedRequest(f, "PUT", "/s3/kura/newfolder/inside.jpg", { body: jpeg })).status).toBe(200);
    const flat = await (await signedRequest(f, "GET", "/s3/kura?list-type=2&prefix=newfolder%2F")).text();
    expect([...flat.matchAll(/<Key>([^<]+)<\/Key>/g)].map((m) => m[1])).toEqual(["newfolder/", "newfolder/inside.jpg"]);
    const grouped = await (await signedRequest(f, "GET", "/s3/kura?delimiter=%2F&prefix=")).text();
    expect(grouped).toContain("<Prefix>newfolder/</Prefix>");
    const head = await signedRequest(f, "HEAD", "/s3/kura/newfolder/");
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("0");
    expect(head.headers.get("etag")).toBe('"d41d8cd98f00b204e9800998ecf8427e"');
    expect((await f.admin.json("GET", "/api/admin/images?page_size=1")).total).toBe(before + 1);
    expect((await fetch(`${f.cred.url_prefix}newfolder/`)).status).toBe(404);
    const withBytes = await signedRequest(f, "PUT", "/s3/kura/other/", { body: jpeg });
    expect(withBytes.status).toBe(400);
    expect(await codeOf(withBytes)).toBe("InvalidArgument");
    expect((await signedRequest(f, "DELETE", "/s3/kura/newfolder/")).status).toBe(204);
    expect((await signedRequest(f, "HEAD", "/s3/kura/newfolder/")).status).toBe(404);
    expect((await signedRequest(f, "HEAD", "/s3/kura/newfolder/inside.jpg")).status).toBe(200);
  });

  test("SigV2 (header or presigned query) is told that only Signature V4 is supported", async () => {
    const header = await fetch(f.server.url("/s3/kura/cond.jpg"), {
      headers: { authorization: `AWS ${f.cred.access_key_id}:c2lnbmF0dXJl`, date: new Date().toUTCString() },
    });
    expect(header.status).toBe(400);
    const text = await header.text();
    expect(text).toContain("<Code>InvalidRequest</Code>");
    expect(text).toContain("只支持 AWS Signature V4");
    const expires = Math.floor(Date.now() / 1000) + 600;
    const presigned = await fetch(f.server.url(`/s3/kura/cond.jpg?AWSAccessKeyId=${f.cred.access_key_id}&Expires=${expires}&Signature=c2ln`));
    expect(presigned.status).toBe(400);
    expect(await presigned.text()).toContain("只支持 AWS Signature V4");
  });

  test("overwriting a key puts the superseded images in the cleanup review with reason superseded; the owner can remove them", async () => {
    const versions = [await makeJpeg(40, 40, 1), await makeJpeg(40, 40, 2), await makeJpeg(40, 40, 3)];
    for (const bytes of versions) expect((await signedRequest(f, "PUT", "/s3/kura/over.jpg", { body: bytes })).status).toBe(200);
    const got = await signedRequest(f, "GET", "/s3/kura/over.jpg");
    expect(sha256(new Uint8Array(await got.arrayBuffer()))).toBe(sha256(versions[2]!));
    const cleanup = await f.admin.json("GET", "/api/admin/cleanup?page_size=100");
    const superseded = cleanup.items.filter((i: { reason: string; file_name: string }) => i.reason === "superseded" && i.file_name === "over.jpg");
    expect(superseded.length).toBe(2);
    for (const item of superseded) {
      const served = await fetch(f.server.url(item.url));
      expect(served.status).toBe(200);
      const hash = sha256(new Uint8Array(await served.arrayBuffer()));
      expect([sha256(versions[0]!), sha256(versions[1]!)]).toContain(hash);
    }
    for (const item of superseded) expect((await f.admin.request("DELETE", `/api/admin/images/${item.id}`)).status).toBe(204);
    const after = await f.admin.json("GET", "/api/admin/cleanup?page_size=100");
    expect(after.items.filter((i: { file_name: string }) => i.file_name === "over.jpg")).toEqual([]);
    expect((await signedRequest(f, "HEAD", "/s3/kura/over.jpg")).status).toBe(200);
  });

  test("a superseded image stays on the cleanup list when viewed or when cold judging re-runs", async () => {
    for (const seed of [21, 22]) expect((await signedRequest(f, "PUT", "/s3/kura/kept.jpg", { body: await makeJpeg(40, 40, seed) })).status).toBe(200);
    const listed = async () =>
      (await f.admin.json("GET", "/api/admin/cleanup?page_size=100")).items.filter(
        (i: { reason: string; file_name: string }) => i.reason === "superseded" && i.file_name === "kept.jpg",
      );
    const [old] = await listed();
    expect(old).toBeDefined();
    // A public view, written by the activity flush: it clears cold marks, not this one.
    await f.admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
    expect((await fetch(f.server.url(old.url))).status).toBe(200);
    for (let i = 0; i < 100 && (await f.admin.json("GET", `/api/admin/images/${old.id}`)).access_count === 0; i++) await Bun.sleep(100);
    expect((await f.admin.json("GET", `/api/admin/images/${old.id}`)).access_count).toBe(1);
    // Changing the cold threshold re-judges cold marks at once (0 clears them all): not this one.
    await f.admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30 });
    await f.admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 0 });
    expect((await listed()).map((i: { id: string }) => i.id)).toEqual([old.id]);
  });

  /** A browser-form upload exactly as boto3's generate_presigned_post prepares it (policy built here). */
  function presignedPost(key: string, opts: { conditions?: unknown[]; expiresIn?: number; secret?: string; extraFields?: Record<string, string> } = {}) {
    const now = new Date();
    const amzDate = now
      .toISOString()
      .replace(/[-:]/g, "")
      .replace(/\.\d{3}/, "");
    const day = amzDate.slice(0, 8);
    const credential = `${f.cred.access_key_id}/${day}/${f.cred.region}/s3/aws4_request`;
    const fields: Record<string, string> = {
      key,
      "x-amz-algorithm": "AWS4-HMAC-SHA256",
      "x-amz-credential": credential,
      "x-amz-date": amzDate,
      ...opts.extraFields,
    };
    const keyCondition = key.includes("${filename}") ? ["starts-with", "$key", key.slice(0, key.indexOf("${filename}"))] : { key };
    const policy = {
      expiration: new Date(now.getTime() + (opts.expiresIn ?? 3600) * 1000).toISOString(),
      conditions: [
        { bucket: f.cred.bucket },
        keyCondition,
        { "x-amz-algorithm": "AWS4-HMAC-SHA256" },
        { "x-amz-credential": credential },
        { "x-amz-date": amzDate },
        ...(opts.conditions ?? []),
      ],
    };
    fields.policy = Buffer.from(JSON.stringify(policy)).toString("base64");
    const signingKey = hmac(hmac(hmac(hmac(`AWS4${opts.secret ?? f.cred.secret_access_key}`, day), f.cred.region), "s3"), "aws4_request");
    fields["x-amz-signature"] = createHmac("sha256", signingKey).update(fields.policy).digest("hex");
    return { url: `${f.cred.endpoint}/${f.cred.bucket}`, fields };
  }
  const postForm = (post: { url: string; fields: Record<string, string> }, file: Uint8Array, name = "photo.png") => {
    const form = new FormData();
    for (const [k, v] of Object.entries(post.fields)) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(file)], { type: "image/png" }), name);
    return fetch(post.url, { method: "POST", body: form });
  };

  test("boto3-style presigned POST uploads through the form; bad signature, expiry, key outside the policy and size range are refused", async () => {
    const png = await makePng(30, 20, 5);
    const ok = await postForm(presignedPost("forms/a.png"), png);
    expect(ok.status).toBe(204);
    expect(ok.headers.get("etag")).toMatch(/^"[0-9a-f]{32}"$/);
    const served = await fetch(`${f.cred.url_prefix}forms/a.png`);
    expect(served.status).toBe(200);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(png));

    const named = await postForm(
      presignedPost("forms/${filename}", { extraFields: { success_action_status: "201" }, conditions: [{ success_action_status: "201" }] }),
      png,
      "b.png",
    );
    expect(named.status).toBe(201);
    expect(await named.text()).toContain("<Key>forms/b.png</Key>");
    expect((await signedRequest(f, "HEAD", "/s3/kura/forms/b.png")).status).toBe(200);

    const badSig = await postForm(presignedPost("forms/c.png", { secret: "wrong-secret" }), png);
    expect(badSig.status).toBe(403);
    expect(await codeOf(badSig)).toBe("SignatureDoesNotMatch");
    const expired = await postForm(presignedPost("forms/c.png", { expiresIn: -60 }), png);
    expect(expired.status).toBe(403);
    expect(await codeOf(expired)).toBe("AccessDenied");
    const outside = presignedPost("forms/${filename}");
    const escaped = await postForm({ ...outside, fields: { ...outside.fields, key: "elsewhere/c.png" } }, png);
    expect(escaped.status).toBe(403);
    const unlisted = presignedPost("forms/d.png");
    expect((await postForm({ ...unlisted, fields: { ...unlisted.fields, "x-amz-meta-extra": "1" } }, png)).status).toBe(403);
    const tooBig = await postForm(presignedPost("forms/e.png", { conditions: [["content-length-range", 1, 100]] }), png);
    expect(tooBig.status).toBe(400);
    expect(await codeOf(tooBig)).toBe("EntityTooLarge");
    const tooSmall = await postForm(presignedPost("forms/g.png", { conditions: [["content-length-range", png.length + 1, 10_000_000]] }), png);
    expect(tooSmall.status).toBe(400);
    expect(await codeOf(tooSmall)).toBe("EntityTooSmall");
    for (const key of ["c.png", "d.png", "e.png", "g.png"]) expect((await signedRequest(f, "HEAD", `/s3/kura/forms/${key}`)).status).toBe(404);
    const wrongBucket = presignedPost("forms/f.png");
    expect((await postForm({ ...wrongBucket, url: `${f.cred.endpoint}/photos` }, png)).status).toBe(404);
  });

  test("ListMultipartUploads through the AWS SDK: the open uploads, paged by key and upload-id markers", async () => {
    const s3 = sdkClient(f.cred);
    const ids: string[] = [];
    for (const key of ["mp/a.jpg", "mp/b.jpg", "mp/b.jpg"]) ids.push((await s3.send(new CreateMultipartUploadCommand({ Bucket: "kura", Key: key }))).UploadId!);
    const seen: { key: string; id: string }[] = [];
    let keyMarker: string | undefined;
    let idMarker: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await s3.send(
        new ListMultipartUploadsCommand({ Bucket: "kura", Prefix: "mp/", MaxUploads: 1, KeyMarker: keyMarker, UploadIdMarker: idMarker }),
      );
      seen.push(...(res.Uploads ?? []).map((u) => ({ key: u.Key!, id: u.UploadId! })));
      if (!res.IsTruncated) break;
      keyMarker = res.NextKeyMarker;
      idMarker = res.NextUploadIdMarker;
    }
    expect(seen.map((s) => s.key)).toEqual(["mp/a.jpg", "mp/b.jpg", "mp/b.jpg"]);
    expect(new Set(seen.map((s) => s.id))).toEqual(new Set(ids));
  });
});
