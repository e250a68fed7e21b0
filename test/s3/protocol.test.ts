/**
 * Protocol details real clients depend on, sent as raw SigV4-signed requests (aws4): bucket calls rclone
 * makes, ListObjects v1 paging by NextMarker, XML bodies with Go-style entities, Content-MD5, and 501
 * for operations Kura does not offer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import aws4 from "aws4";
import { createHash } from "node:crypto";
import { makeJpeg } from "../helpers/images";
import { startS3Fixture, type S3Fixture } from "./s3-setup";
import { parseCompleteMultipart, parseDeleteObjects } from "../../src/s3/xml";

describe("S3 protocol details", () => {
  let f: S3Fixture;
  let jpeg: Buffer;

  async function signed(method: string, path: string, opts: { body?: Buffer | string; headers?: Record<string, string> } = {}): Promise<Response> {
    const url = new URL(f.server.base);
    const req = aws4.sign(
      { host: url.host, path, method, service: "s3", region: "us-east-1", headers: { ...opts.headers }, body: opts.body ?? "" },
      { accessKeyId: f.cred.access_key_id, secretAccessKey: f.cred.secret_access_key },
    );
    const headers = req.headers as Record<string, string>;
    const body = typeof opts.body === "string" ? opts.body : opts.body && new Uint8Array(opts.body);
    return fetch(`${f.server.base}${path}`, { method, headers, body: method === "GET" || method === "HEAD" ? undefined : body });
  }
  const xmlOf = async (res: Response) => {
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${res.status}: ${text}`);
    return text;
  };

  beforeAll(async () => {
    f = await startS3Fixture();
    jpeg = await makeJpeg(30, 30, 41);
    for (const key of ["a.jpg", "d1/x.jpg", "d1/y.jpg", "d2/z.jpg", "e.jpg"]) expect((await signed("PUT", `/s3/kura/${key}`, { body: jpeg })).status).toBe(200);
  });
  afterAll(() => f.server.dispose());

  test("only the credential's bucket exists: kura is 200, any other name is NoSuchBucket for every operation", async () => {
    expect((await signed("PUT", "/s3/kura", { headers: { "x-amz-acl": "private" } })).status).toBe(200);
    expect((await signed("HEAD", "/s3/kura/")).status).toBe(200);
    expect(await xmlOf(await signed("GET", "/s3/kura?versioning="))).toContain("<VersioningConfiguration");
    expect(await xmlOf(await signed("GET", "/s3/kura?location="))).toContain("<LocationConstraint");
    expect((await signed("HEAD", "/s3/kura/a.jpg")).status).toBe(200);
    for (const [method, path] of [
      ["PUT", "/s3/photos"],
      ["GET", "/s3/photos?delimiter=%2F&prefix="],
      ["GET", "/s3/photos/a.jpg"],
      ["DELETE", "/s3/photos/a.jpg"],
      ["PUT", "/s3/Kura/x.jpg"],
    ] as const) {
      const res = await signed(method, path, method === "PUT" && path.endsWith(".jpg") ? { body: jpeg } : {});
      expect(res.status).toBe(404);
      expect(await res.text()).toContain("<Code>NoSuchBucket</Code>");
    }
    expect((await signed("HEAD", "/s3/photos/a.jpg")).status).toBe(404);
    const copy = await signed("PUT", "/s3/kura/copied.jpg", { headers: { "x-amz-copy-source": "photos/a.jpg" } });
    expect(copy.status).toBe(404);
    expect(await copy.text()).toContain("<Code>NoSuchBucket</Code>");
    // Nothing was deleted or stored through the wrong names.
    expect((await signed("HEAD", "/s3/kura/a.jpg")).status).toBe(200);
    expect((await signed("HEAD", "/s3/kura/x.jpg")).status).toBe(404);
    const buckets = await xmlOf(await signed("GET", "/s3/"));
    expect([...buckets.matchAll(/<Name>([^<]+)<\/Name>/g)].map((m) => m[1])).toEqual(["kura"]);
    const created = /<CreationDate>([^<]+)<\/CreationDate>/.exec(buckets)![1]!;
    const token = (await f.admin.json("GET", "/api/admin/tokens?page_size=100")).items.find((t: { id: number }) => t.id === f.tokenId);
    expect(new Date(created).getTime()).toBe(new Date(token.created_at.replace(" ", "T") + (token.created_at.endsWith("Z") ? "" : "Z")).getTime());
    expect(new Date(created).getFullYear()).toBeGreaterThan(2000);
  });

  test("ListObjects v1 pages by NextMarker and skips the keys under a CommonPrefix marker", async () => {
    const seen: string[] = [];
    let marker = "";
    for (let i = 0; i < 10; i++) {
      const xml = await xmlOf(await signed("GET", `/s3/kura?delimiter=%2F&marker=${encodeURIComponent(marker)}&max-keys=1&prefix=`));
      seen.push(...[...xml.matchAll(/<Key>([^<]+)<\/Key>|<Prefix>([^<]+)<\/Prefix>/g)].map((m) => m[1] ?? m[2]!));
      const next = /<NextMarker>([^<]*)<\/NextMarker>/.exec(xml)?.[1];
      if (!xml.includes("<IsTruncated>true</IsTruncated>")) break;
      expect(next).toBeDefined();
      marker = next!;
    }
    expect(seen).toEqual(["a.jpg", "d1/", "d2/", "e.jpg"]);
    const flat = await xmlOf(await signed("GET", "/s3/kura?delimiter=&max-keys=1000&prefix=d"));
    expect([...flat.matchAll(/<Key>([^<]+)<\/Key>/g)].map((m) => m[1])).toEqual(["d1/x.jpg", "d1/y.jpg", "d2/z.jpg"]);
    const encoded = await xmlOf(await signed("GET", "/s3/kura?list-type=2&encoding-type=url&prefix=d1%2F"));
    expect(encoded).toContain("<Key>d1%2Fx.jpg</Key>");
  });

  test("a wrong Content-MD5 is BadDigest and stores nothing", async () => {
    const res = await signed("PUT", "/s3/kura/bad-md5.jpg", { body: jpeg, headers: { "content-md5": createHash("md5").update("other").digest("base64") } });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("<Code>BadDigest</Code>");
    expect((await signed("HEAD", "/s3/kura/bad-md5.jpg")).status).toBe(404);
  });

  test("DeleteObjects accepts a Quiet request; unsupported operations are 501 NotImplemented", async () => {
    const body = `<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>true</Quiet><Object><Key>e.jpg</Key></Object></Delete>`;
    const res = await signed("POST", "/s3/kura/?delete=", { body, headers: { "content-md5": createHash("md5").update(body).digest("base64") } });
    const xml = await xmlOf(res);
    expect(xml).toContain("<DeleteResult");
    expect(xml).not.toContain("<Deleted>");
    expect((await signed("HEAD", "/s3/kura/e.jpg")).status).toBe(404);
    for (const [method, path] of [
      ["GET", "/s3/kura/a.jpg?acl="],
      ["PUT", "/s3/kura?policy="],
      ["GET", "/s3/kura/a.jpg?tagging="],
    ] as const) {
      const r = await signed(method, path, method === "PUT" ? { body: "{}" } : {});
      expect(r.status).toBe(501);
      expect(await r.text()).toContain("<Code>NotImplemented</Code>");
    }
  });
});

describe("S3 XML request bodies", () => {
  test("Complete parts with Go (&#34;) and SDK (&quot;) quoting; refuses DOCTYPE and garbage", () => {
    const go =
      "<CompleteMultipartUpload><Part><ETag>&#34;abc&#34;</ETag><PartNumber>1</PartNumber></Part><Part><PartNumber>2</PartNumber><ETag>&quot;def&quot;</ETag></Part></CompleteMultipartUpload>";
    expect(parseCompleteMultipart(go)).toEqual([
      { partNumber: 1, etag: "abc" },
      { partNumber: 2, etag: "def" },
    ]);
    expect(
      parseCompleteMultipart(
        '<!DOCTYPE x [<!ENTITY a "b">]><CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&a;</ETag></Part></CompleteMultipartUpload>',
      ),
    ).toBeUndefined();
    expect(parseCompleteMultipart("not xml")).toBeUndefined();
    expect(parseDeleteObjects('<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>a &amp; b.jpg</Key></Object></Delete>')).toEqual({
      quiet: false,
      keys: ["a & b.jpg"],
    });
    expect(parseDeleteObjects("<Delete></Delete>")).toBeUndefined();
  });
});
