/**
 * Request edges clients reach in practice:
 * - ListParts with `max-parts=0` is an empty page that is not truncated (a "while IsTruncated" client
 *   used to loop forever on NextPartNumberMarker 0), as ListObjects and ListMultipartUploads answer 0.
 * - `encoding-type`: only `url` encodes and only then says `<EncodingType>url</EncodingType>`; an empty
 *   one lists raw names without claiming to have encoded them; anything else is 400 InvalidArgument.
 * - Keys with `.` / `..` segments, which Bun resolves before Kura sees the path: a key with a `./`
 *   (or a leading `../`) is 400 InvalidArgument saying so, `a/../b` a SignatureDoesNotMatch that
 *   names dot segments. Nothing is stored under any key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ListObjectsV2Command, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { makeJpeg } from "../helpers/images";
import { errorCodeOf, errorMessageOf, sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const B = "kura";
let f: S3Fixture;
let s3: S3Client;
let jpeg: Buffer;

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  s3 = sdkClient(f.cred);
  jpeg = await makeJpeg(40, 30, 9501);
});
afterAll(() => f.server.dispose());

const text = async (path: string) => {
  const res = await signedRequest(f, "GET", path);
  return { status: res.status, body: await res.text() };
};
const tag = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];

describe("ListParts max-parts=0", () => {
  test("is an empty page that is not truncated, with parts staged", async () => {
    const created = await signedRequest(f, "POST", `/s3/${B}/lp/a.jpg?uploads=`);
    const uploadId = tag(await created.text(), "UploadId")!;
    for (const n of [1, 2]) expect((await signedRequest(f, "PUT", `/s3/${B}/lp/a.jpg?partNumber=${n}&uploadId=${uploadId}`, { body: jpeg })).status).toBe(200);
    const zero = await text(`/s3/${B}/lp/a.jpg?max-parts=0&uploadId=${uploadId}`);
    expect(zero.status).toBe(200);
    expect([tag(zero.body, "IsTruncated"), tag(zero.body, "MaxParts"), zero.body.includes("<Part>")]).toEqual(["false", "0", false]);
    // Paging with max-parts=1 still walks both parts and ends.
    const first = await text(`/s3/${B}/lp/a.jpg?max-parts=1&uploadId=${uploadId}`);
    expect([tag(first.body, "IsTruncated"), tag(first.body, "NextPartNumberMarker")]).toEqual(["true", "1"]);
    const second = await text(`/s3/${B}/lp/a.jpg?max-parts=1&part-number-marker=1&uploadId=${uploadId}`);
    expect([tag(second.body, "IsTruncated"), tag(second.body, "PartNumber")]).toEqual(["false", "2"]);
  });
});

describe("encoding-type", () => {
  beforeAll(async () => {
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "enc/a b%41.jpg", Body: jpeg }));
  });

  test("url encodes the names and says so", async () => {
    for (const query of ["encoding-type=url&prefix=enc%2F", "list-type=2&encoding-type=url&prefix=enc%2F"]) {
      const { body } = await text(`/s3/${B}?${query}`);
      expect([tag(body, "EncodingType"), tag(body, "Key")]).toEqual(["url", "enc%2Fa%20b%2541.jpg"]);
    }
  });

  test("an empty one lists raw names and does not claim to have encoded them (clients would decode %41 to A)", async () => {
    for (const query of ["encoding-type=&prefix=enc%2F", "list-type=2&encoding-type=&prefix=enc%2F"]) {
      const { status, body } = await text(`/s3/${B}?${query}`);
      expect([status, tag(body, "EncodingType"), tag(body, "Key")]).toEqual([200, undefined, "enc/a b%41.jpg"]);
    }
    const created = await signedRequest(f, "POST", `/s3/${B}/enc/up.jpg?uploads=`);
    expect(created.status).toBe(200);
    const uploads = await text(`/s3/${B}?uploads=&encoding-type=`);
    expect([tag(uploads.body, "EncodingType"), tag(uploads.body, "Key")]).toEqual([undefined, "enc/up.jpg"]);
  });

  test("any other value is 400 InvalidArgument naming the argument", async () => {
    for (const query of ["encoding-type=URL", "list-type=2&encoding-type=xml", "uploads=&encoding-type=base64"]) {
      const { status, body } = await text(`/s3/${B}?${query}`);
      expect([status, errorCodeOf(body), tag(body, "ArgumentName")]).toEqual([400, "InvalidArgument", "encoding-type"]);
    }
  });
});

describe("keys with dot segments", () => {
  const put = (Key: string) =>
    s3.send(new PutObjectCommand({ Bucket: B, Key, Body: jpeg })).then(
      () => "200",
      (e: { name: string; message: string; $metadata?: { httpStatusCode?: number } }) => `${e.$metadata?.httpStatusCode} ${e.name} ${e.message}`,
    );
  const listed = async () => ((await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "dots" }))).Contents ?? []).map((o) => o.Key);

  test("a `.` segment anywhere, or a leading `../`, is 400 InvalidArgument that says so", async () => {
    for (const key of ["./dots-a.jpg", "dots/./b.jpg", "dots/c/.", "../dots-d.jpg"]) {
      const answer = await put(key);
      expect(answer).toStartWith("400 InvalidArgument ");
      expect(answer).toContain(". 或 .. 路径段");
    }
    expect(await listed()).toEqual([]);
  });

  test("`a/../b` (the name before `..` is lost) is SignatureDoesNotMatch with a message that names dot segments", async () => {
    const answer = await put("dots/x/../y.jpg");
    expect(answer).toStartWith("403 SignatureDoesNotMatch ");
    expect(answer).toContain(". 或 .. 路径段");
    expect(await listed()).toEqual([]);
  });

  test("a raw signed request behaves the same, and a wrong secret still reads as a wrong secret first", async () => {
    const dotted = await signedRequest(f, "PUT", `/s3/${B}/dots/./raw.jpg`, { body: jpeg });
    const body = await dotted.text();
    expect([dotted.status, errorCodeOf(body)]).toEqual([400, "InvalidArgument"]);
    const wrong = await signedRequest(f, "PUT", `/s3/${B}/dots/raw.jpg`, { body: jpeg, cred: { ...f.cred, secret_access_key: "wrong-secret-0123456789" } });
    const wrongBody = await wrong.text();
    expect([wrong.status, errorCodeOf(wrongBody)]).toEqual([403, "SignatureDoesNotMatch"]);
    expect(errorMessageOf(wrongBody)).toStartWith("签名不匹配，请检查访问密钥和签名方式");
    expect(await listed()).toEqual([]);
  });
});
