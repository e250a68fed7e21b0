/**
 * CopyObject's source conditions and source version, black-box against a real Kura (raw SigV4 and
 * the real AWS SDK). AWS CopyObject: a failed `x-amz-copy-source-if-*` condition is 412
 * PreconditionFailed (never 304) and copies nothing; if-match true with if-unmodified-since false
 * copies, if-none-match false with if-modified-since true is 412. The bucket is unversioned, so the
 * only source version id is `null`; any other is 400 InvalidArgument and copies nothing.
 */
import { CopyObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { makePng } from "../helpers/images";
import { queryDb } from "../http/channels.helpers";
import { errorCodeOf as codeOf, sdkClient, startS3Fixture, type S3Fixture } from "./s3-setup";
import { signedS3 } from "./signed-request";

const PAST = "Mon, 01 Jan 2001 00:00:00 GMT";
const FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT";
const WRONG_ETAG = '"00000000000000000000000000000000"';

describe("CopyObject x-amz-copy-source-if-* and versionId", () => {
  let f: S3Fixture;
  let etag: string;
  let lastModified: string;
  let n = 0;
  const req = (method: string, key: string, headers: Record<string, string> = {}) => signedS3(f.server.base, f.cred, method, `/s3/kura/${key}`, { headers });
  const keyCount = () => queryDb<{ n: number }>(f.server, "SELECT count(*) AS n FROM images")[0]!.n;

  /** Copies src.png to a fresh key with `headers`; returns the answer and whether the key exists afterwards. */
  async function copy(headers: Record<string, string>, source = "kura/src.png") {
    const dest = `dest-${++n}.png`;
    const before = keyCount();
    const res = await req("PUT", dest, { "x-amz-copy-source": source, ...headers });
    const body = await res.text();
    const head = await req("HEAD", dest);
    return { status: res.status, code: codeOf(body), body, exists: head.status === 200, destEtag: head.headers.get("etag"), added: keyCount() - before };
  }

  beforeAll(async () => {
    f = await startS3Fixture();
    const png = await makePng(30, 20, 5);
    expect((await signedS3(f.server.base, f.cred, "PUT", "/s3/kura/src.png", { body: png })).status).toBe(200);
    const head = await req("HEAD", "src.png");
    etag = head.headers.get("etag")!;
    lastModified = head.headers.get("last-modified")!;
    expect(etag).toBe(`"${createHash("md5").update(png).digest("hex")}"`);
  });
  afterAll(() => f.server.dispose());

  // Per header: values that fail (412, nothing copied) and values that hold (copied), in one test so
  // that neither ignoring the header nor refusing every copy passes.
  const cases: [string, () => string[], () => string[]][] = [
    ["x-amz-copy-source-if-match", () => [WRONG_ETAG], () => [etag, etag.replaceAll('"', ""), "*"]],
    ["x-amz-copy-source-if-none-match", () => [etag, "*"], () => [WRONG_ETAG]],
    ["x-amz-copy-source-if-unmodified-since", () => [PAST], () => [lastModified, FUTURE]],
    ["x-amz-copy-source-if-modified-since", () => [FUTURE, lastModified], () => [PAST]],
  ];
  test.each(cases)("%s: a failed condition is 412 PreconditionFailed and copies nothing; a condition that holds copies", async (name, fails, holds) => {
    for (const value of fails()) {
      const r = await copy({ [name]: value });
      expect([value, r.status, r.code, r.exists, r.added]).toEqual([value, 412, "PreconditionFailed", false, 0]);
      expect(r.body).toMatch(/<Message>[^<]*[\u4e00-\u9fff]/);
    }
    for (const value of holds()) {
      const r = await copy({ [name]: value });
      expect([value, r.status, r.exists, r.destEtag, r.added]).toEqual([value, 200, true, etag, 1]);
    }
  });

  test("AWS's combinations: if-none-match false + if-modified-since true is 412; if-match true + if-unmodified-since false copies", async () => {
    const refused = await copy({ "x-amz-copy-source-if-none-match": etag, "x-amz-copy-source-if-modified-since": PAST });
    expect([refused.status, refused.code, refused.exists]).toEqual([412, "PreconditionFailed", false]);
    const copied = await copy({ "x-amz-copy-source-if-match": etag, "x-amz-copy-source-if-unmodified-since": PAST });
    expect([copied.status, copied.exists, copied.destEtag]).toEqual([200, true, etag]);
  });

  test("a failed condition on a self-copy with REPLACE leaves the stored metadata as it was", async () => {
    const put = (headers: Record<string, string>) =>
      req("PUT", "src.png", { "x-amz-copy-source": "kura/src.png", "x-amz-metadata-directive": "REPLACE", ...headers });
    expect((await put({ "x-amz-meta-mtime": "1", "x-amz-copy-source-if-match": etag })).status).toBe(200);
    const refused = await put({ "x-amz-meta-mtime": "2", "x-amz-copy-source-if-match": WRONG_ETAG });
    expect([refused.status, codeOf(await refused.text())]).toEqual([412, "PreconditionFailed"]);
    expect((await req("HEAD", "src.png")).headers.get("x-amz-meta-mtime")).toBe("1");
  });

  test("a self-copy must change the metadata (REPLACE), as on AWS; its answer's LastModified is the one HEAD gives", async () => {
    const same = await req("PUT", "src.png", { "x-amz-copy-source": "kura/src.png" });
    expect([same.status, codeOf(await same.text())]).toEqual([400, "InvalidRequest"]);
    const replaced = await req("PUT", "src.png", { "x-amz-copy-source": "kura/src.png", "x-amz-metadata-directive": "REPLACE", "x-amz-meta-mtime": "3" });
    const body = await replaced.text();
    expect(replaced.status).toBe(200);
    const head = await req("HEAD", "src.png");
    expect(head.headers.get("x-amz-meta-mtime")).toBe("3");
    const answered = /<LastModified>([^<]+)<\/LastModified>/.exec(body)![1]!;
    expect(new Date(answered).getTime()).toBe(new Date(head.headers.get("last-modified")!).getTime());
  });

  test("source versionId: null (every object's version in an unversioned bucket) copies; any other id is 400 InvalidArgument and copies nothing", async () => {
    const r = await copy({}, "kura/src.png?versionId=null");
    expect([r.status, r.exists, r.destEtag]).toEqual([200, true, etag]);
    for (const id of ["does-not-exist", "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY", ""]) {
      const refused = await copy({}, `kura/src.png?versionId=${encodeURIComponent(id)}`);
      expect([id, refused.status, refused.code, refused.exists, refused.added]).toEqual([id, 400, "InvalidArgument", false, 0]);
    }
  });

  test("the AWS SDK sees PreconditionFailed (412) for CopySourceIfMatch with another ETag, and copies with the right one", async () => {
    const s3 = sdkClient(f.cred);
    const send = (CopySourceIfMatch: string, Key: string) =>
      s3.send(new CopyObjectCommand({ Bucket: "kura", Key, CopySource: "kura/src.png", CopySourceIfMatch }));
    const err = await send(WRONG_ETAG, "sdk-refused.png").then(
      () => undefined,
      (e: { name: string; $metadata?: { httpStatusCode?: number } }) => e,
    );
    expect([err?.name, err?.$metadata?.httpStatusCode]).toEqual(["PreconditionFailed", 412]);
    expect((await req("HEAD", "sdk-refused.png")).status).toBe(404);
    const ok = await send(etag, "sdk-copied.png");
    expect(ok.CopyObjectResult?.ETag).toBe(etag);
  });
});
