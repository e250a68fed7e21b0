/**
 * Browser-form uploads prepared by a real peer: the AWS SDK's createPresignedPost
 * (@aws-sdk/s3-presigned-post), whose fields are capitalised (`Policy`, `X-Amz-Signature`) and
 * carry the bucket as a field. clients.test.ts builds boto3's shape by hand; this is the SDK's own.
 */
import { createPresignedPost } from "@aws-sdk/s3-presigned-post";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makePng, sha256 } from "../helpers/images";
import { responseCodeOf as codeOf, sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

describe("createPresignedPost from the AWS SDK", () => {
  let f: S3Fixture;
  let png: Buffer;
  beforeAll(async () => {
    f = await startS3Fixture();
    png = await makePng(40, 30, 9);
  });
  afterAll(() => f.server.dispose());

  const presign = (Key: string, opts: { Conditions?: Parameters<typeof createPresignedPost>[1]["Conditions"]; Fields?: Record<string, string> } = {}) =>
    createPresignedPost(sdkClient(f.cred), { Bucket: f.cred.bucket, Key, Expires: 600, ...opts });
  const send = (post: { url: string; fields: Record<string, string> }, file: Uint8Array, extra: Record<string, string> = {}) => {
    const form = new FormData();
    for (const [k, v] of Object.entries({ ...post.fields, ...extra })) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(file)], { type: "image/png" }), "from-browser.png");
    return fetch(post.url, { method: "POST", body: form, redirect: "manual" });
  };
  const stored = async (key: string) => (await signedRequest(f, "HEAD", `/s3/${f.cred.bucket}/${key}`)).status;

  test("the SDK's form uploads the file under the signed key, and the bytes are served as sent", async () => {
    const post = await presign("sdk/a.png");
    expect(post.url).toBe(`${f.cred.endpoint}/${f.cred.bucket}`);
    expect(Object.keys(post.fields)).toEqual(
      expect.arrayContaining(["bucket", "key", "Policy", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Signature"]),
    );
    const res = await send(post, png);
    expect(res.status).toBe(204);
    expect(res.headers.get("etag")).toMatch(/^"[0-9a-f]{32}"$/);
    const served = await fetch(`${f.cred.url_prefix}sdk/a.png`);
    expect(served.status).toBe(200);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(png));
  });

  test("the SDK's conditions are enforced: size range, content-type prefix, exact key, and no unsigned fields", async () => {
    const small = await presign("sdk/big.png", { Conditions: [["content-length-range", 1, 64]] });
    const tooBig = await send(small, png);
    expect(tooBig.status).toBe(400);
    expect(await codeOf(tooBig)).toBe("EntityTooLarge");

    const typed = await presign("sdk/typed.png", { Conditions: [["starts-with", "$Content-Type", "image/"]], Fields: { "Content-Type": "image/png" } });
    const wrongType = await send(typed, png, { "Content-Type": "text/html" });
    expect(wrongType.status).toBe(403);
    expect(await codeOf(wrongType)).toBe("AccessDenied");
    expect((await send(typed, png)).status).toBe(204);

    const exact = await presign("sdk/exact.png");
    const moved = await send(exact, png, { key: "sdk/elsewhere.png" });
    expect(moved.status).toBe(403);
    expect(await codeOf(moved)).toBe("AccessDenied");
    const extra = await send(exact, png, { "x-amz-meta-owner": "mallory" });
    expect(extra.status).toBe(403);
    expect(await codeOf(extra)).toBe("AccessDenied");
    const forged = await send(exact, png, { "X-Amz-Signature": "0".repeat(64) });
    expect(forged.status).toBe(403);
    expect(await codeOf(forged)).toBe("SignatureDoesNotMatch");

    expect(await stored("sdk/typed.png")).toBe(200);
    for (const key of ["sdk/big.png", "sdk/exact.png", "sdk/elsewhere.png"]) expect(await stored(key)).toBe(404);
  });

  test("a signed success_action_redirect answers 303 to it with bucket, key and ETag; a signed 201 answers the XML", async () => {
    const target = "https://app.example/uploaded?from=form";
    const redirecting = await presign("sdk/redirect.png", { Conditions: [{ success_action_redirect: target }], Fields: { success_action_redirect: target } });
    const res = await send(redirecting, png);
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe("https://app.example/uploaded");
    expect(Object.fromEntries(location.searchParams)).toEqual({
      from: "form",
      bucket: f.cred.bucket,
      key: "sdk/redirect.png",
      etag: expect.stringMatching(/^"[0-9a-f]{32}"$/),
    });

    const xml = await presign("sdk/xml.png", { Conditions: [{ success_action_status: "201" }], Fields: { success_action_status: "201" } });
    const created = await send(xml, png);
    expect(created.status).toBe(201);
    const body = await created.text();
    expect(body).toContain(`<Bucket>${f.cred.bucket}</Bucket>`);
    expect(body).toContain("<Key>sdk/xml.png</Key>");
  });
});
