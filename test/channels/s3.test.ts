import { afterAll, describe, expect, test } from "bun:test";
import aws4 from "aws4";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createS3Driver, s3DriverOptions } from "../../src/channels/drivers/s3.ts";
import { SHARED_DIR } from "../helpers/shared.ts";
import { driverConformance, listKeys, readAll } from "./conformance.ts";
import { startS3, TEST_CREDENTIALS, type RunningS3 } from "./s3rver-harness.ts";
import { verifySigV4 } from "./sigv4-check.ts";
import { parseListPage } from "../../src/channels/drivers/s3/xml.ts";

const scratch = await mkdtemp(join(tmpdir(), "kura-s3-test-"));
const s3 = await startS3({ directory: join(scratch, "store"), buckets: ["kura-test", "kura-other"] });
afterAll(async () => {
  await s3.stop().catch(() => {});
  await rm(scratch, { recursive: true, force: true });
});

function config(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    provider: "Other",
    access_key_id: TEST_CREDENTIALS.accessKeyId,
    secret_access_key: TEST_CREDENTIALS.secretAccessKey,
    endpoint: s3.endpoint,
    region: "us-east-1",
    path: "kura-test",
    ...overrides,
  };
}

describe("test SigV4 verifier (guards the s3rver harness)", () => {
  test("accepts every header-signed request captured from rclone, the AWS SDK and PicGo", async () => {
    const index: { file: string; auth: string }[] = await Bun.file(join(SHARED_DIR, "s3/index.json")).json();
    const rows = index.filter((r) => r.auth === "header");
    expect(rows.length).toBeGreaterThan(100);
    for (const row of rows) {
      const v = await Bun.file(join(SHARED_DIR, "s3/requests", row.file)).json();
      const creds = { accessKeyId: v.credentials.access_key_id, secretAccessKey: v.credentials.secret_access_key };
      const verdict = verifySigV4({ method: v.method, url: v.url, headers: v.headers }, creds);
      expect({ file: row.file, canonical: verdict.canonicalRequest }).toEqual({ file: row.file, canonical: v.expected.canonical_request });
      expect({ file: row.file, ok: verdict.ok }).toEqual({ file: row.file, ok: true });
      const wrong = verifySigV4({ method: v.method, url: v.url, headers: v.headers }, { ...creds, secretAccessKey: "x" });
      expect(wrong.ok).toBe(false);
    }
  });
});

describe("ListObjectsV2 XML", () => {
  // Shaped like AWS's answer to `encoding-type=url` (keys form-encoded, space as '+').
  const page = `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p%2F</Prefix>
<KeyCount>3</KeyCount><MaxKeys>3</MaxKeys><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
<Contents><Key>p/a+b%2Bc%26d.jpg</Key><LastModified>2026-11-22T10:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/%E5%90%8D%0A</Key><LastModified>2026-11-22T10:00:01.000Z</LastModified><Size>0</Size></Contents>
<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;x</NextContinuationToken></ListBucketResult>`;

  test("url-encoded keys are decoded only when the server says it encoded them", () => {
    const parsed = parseListPage(page);
    expect(parsed.objects.map((o) => o.key)).toEqual(["p/a b+c&d.jpg", "p/名\n"]);
    expect(parsed.objects.map((o) => o.size)).toEqual([12, 0]);
    expect(parsed.objects[0].modified?.toISOString()).toBe("2026-11-22T10:00:00.000Z");
    expect(parsed.truncated).toBe(true);
    expect(parsed.nextToken).toBe("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&x");
    const plain = parseListPage(page.replace("<EncodingType>url</EncodingType>", ""));
    expect(plain.objects[0].key).toBe("p/a+b%2Bc%26d.jpg");
  });

  test("XML entities in plain keys are decoded exactly once", () => {
    const xml = `<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a&amp;amp;b &lt;&#39;&#x41;&gt;</Key><Size>1</Size></Contents></ListBucketResult>`;
    const parsed = parseListPage(xml);
    expect(parsed.objects.map((o) => o.key)).toEqual(["a&amp;b <'A>"]);
    expect(parsed.truncated).toBe(false);
    expect(parsed.nextToken).toBeUndefined();
  });

  test("anything but a complete ListBucketResult is refused, not read as an empty page", () => {
    const ok = `<?xml version="1.0"?>\n<ListBucketResult xmlns="x"><IsTruncated>false</IsTruncated><Contents><Key>k</Key><Size>1</Size></Contents></ListBucketResult>\n`;
    expect(parseListPage(ok).objects.map((o) => o.key)).toEqual(["k"]);
    const refused: [string, string][] = [
      ["<html><body>Service temporarily unavailable</body></html>", "不是 ListBucketResult 文档"],
      ["", "不是 ListBucketResult 文档"],
      ["<Error><Code>InternalError</Code></Error>", "不是 ListBucketResult 文档"],
      ["<ListVersionsResult><IsTruncated>false</IsTruncated></ListVersionsResult>", "不是 ListBucketResult 文档"],
      [ok.slice(0, ok.indexOf("</ListBucketResult>")), "文档不完整（缺少结束标签）"],
      [ok.replace("</ListBucketResult>", ""), "文档不完整（缺少结束标签）"],
      [ok.replace("</Contents>", ""), "Contents 元素不完整"],
      [ok.replace("<Key>k</Key>", ""), "缺少 Key"],
      [ok.replace("<Size>1</Size>", "<Size>-5</Size>"), "Size 无效"],
      [ok.replace("false", "maybe"), "IsTruncated 无效"],
      [ok.replace("</IsTruncated>", "</IsTruncated><EncodingType>url</EncodingType>").replace("<Key>k", "<Key>%E5"), "Key 的 URL 编码无效"],
    ];
    for (const [xml, why] of refused) expect(() => parseListPage(xml)).toThrow(`S3 列表响应格式无效：${why}`);
  });

  test("hostile markup is read in linear time (unclosed elements, attributes without an end)", () => {
    const n = 200_000;
    for (const filler of ["<Contents>", "<Contents ", "<Contents><Key>", "<Contents><Key a='"]) {
      const xml = `<ListBucketResult><IsTruncated>false</IsTruncated>${filler.repeat(n)}</ListBucketResult>`;
      const started = performance.now();
      expect(() => parseListPage(xml)).toThrow("S3 列表响应格式无效：Contents 元素不完整");
      // Quadratic matching of 2 MB took hours; linear takes milliseconds. The bound is only a backstop.
      expect(performance.now() - started).toBeLessThan(10_000);
    }
  });
});

let prefixCounter = 0;
driverConformance("s3 (bucket root)", async () => {
  const bucket = `conf-root-${process.pid}`;
  const driver = createS3Driver(config({ path: bucket }));
  await driver.createBucket();
  return { driver, cleanup: async () => {} };
});

driverConformance("s3 (bucket/prefix)", async () => {
  const prefix = `conformance/run-${++prefixCounter}`;
  return { driver: createS3Driver(config({ path: `kura-test/${prefix}` })), cleanup: async () => {} };
});

describe("s3 driver: mapping and wire format", () => {
  test("keys live under the configured prefix and are signed correctly", async () => {
    const before = s3.verified.length;
    const inner = createS3Driver(config({ path: "kura-other/deep/prefix/" }));
    const root = createS3Driver(config({ path: "kura-other" }));
    await inner.put("ab/名 +x.jpg", new Uint8Array([1, 2]), 2);
    expect(await listKeys(root, "")).toEqual(["deep/prefix/ab/名 +x.jpg"]);
    expect(await listKeys(inner, "")).toEqual(["ab/名 +x.jpg"]);
    // The key travels percent-encoded per segment: '/' kept, space %20, '+' %2B.
    const put = s3.verified.slice(before).find((r) => r.method === "PUT");
    expect(put?.url).toBe("/kura-other/deep/prefix/ab/%E5%90%8D%20%2Bx.jpg");
    await inner.delete("ab/名 +x.jpg");
    expect(await listKeys(root, "")).toEqual([]);
  });

  test("acl, storage_class and Content-Type travel as signed headers", async () => {
    const driver = createS3Driver(config({ path: "kura-test/hdr", acl: "private", storage_class: "STANDARD" }));
    const before = s3.verified.length;
    await driver.put("ab/photo.jpg", new Uint8Array([0xff, 0xd8]), 2);
    const put = s3.verified.slice(before).find((r) => r.method === "PUT");
    expect(put?.headers["x-amz-acl"]).toBe("private");
    expect(put?.headers["x-amz-storage-class"]).toBe("STANDARD");
    expect(put?.headers["content-type"]).toBe("image/jpeg");
    expect(put?.headers.authorization).toContain("x-amz-acl");
  });

  test("session_token is sent and signed; Cloudflare defaults the signing region to auto", async () => {
    const driver = createS3Driver(config({ provider: "Cloudflare", region: "", session_token: "tok/en+1" }));
    const before = s3.verified.length;
    await driver.probe(false);
    const list = s3.verified.slice(before)[0];
    expect(list.headers["x-amz-security-token"]).toBe("tok/en+1");
    expect(list.headers.authorization).toContain("/auto/s3/aws4_request");
    expect(list.headers.authorization).toMatch(/SignedHeaders=[^,]*x-amz-security-token/);
  });

  test("provider AWS: regional endpoint, virtual-hosted-style (force_path_style ignored, as in rclone)", async () => {
    const seen: string[] = [];
    // Route the AWS host name to the local server, keeping the Host header the driver signed.
    const route = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(String(input));
      seen.push(`${url.protocol}//${url.host}${url.pathname}`);
      const headers = new Headers(init?.headers);
      headers.set("host", url.host);
      return fetch(`${s3.endpoint}${url.pathname}${url.search}`, { ...init, headers });
    };
    const aws = config({ provider: "AWS", endpoint: "", region: "eu-west-1", path: "kura-test/vh", force_path_style: "true" });
    const driver = createS3Driver(aws, { fetch: route });
    await driver.put("a b.txt", new TextEncoder().encode("hi"), 2);
    expect(await listKeys(driver, "")).toEqual(["a b.txt"]);
    // A path-style view of the same bucket sees the object under vh/.
    expect(await listKeys(createS3Driver(config({ path: "kura-test/vh" })), "")).toEqual(["a b.txt"]);
    expect(new TextDecoder().decode(await readAll((await driver.get("a b.txt")).stream))).toBe("hi");
    await driver.delete("a b.txt");
    await driver.probe(false);
    expect(new Set(seen.map((u) => new URL(u).host))).toEqual(new Set(["kura-test.s3.eu-west-1.amazonaws.com"]));
    expect(seen).toContain("https://kura-test.s3.eu-west-1.amazonaws.com/vh/a%20b.txt");
  });

  test("listing pages through continuation tokens (list_chunk)", async () => {
    const driver = createS3Driver(config({ path: "kura-test/paging", list_chunk: "7" }));
    const keys = Array.from({ length: 20 }, (_, i) => `p/${String(i).padStart(4, "0")}`);
    await Promise.all(keys.map((k) => driver.put(k, new Uint8Array([1]), 1)));
    const before = s3.verified.length;
    expect(await listKeys(driver, "p/")).toEqual(keys);
    const lists = s3.verified.slice(before).filter((r) => r.url.includes("list-type=2"));
    expect(lists.map((r) => r.url.includes("max-keys=7"))).toEqual([true, true, true]);
    expect(lists[0].url).not.toContain("continuation-token=");
    expect(lists[2].url).toContain("continuation-token=");
    expect(() => createS3Driver(config({ list_chunk: "0" }))).toThrow("list_chunk");
  });

  test("option description: rclone names, secrets marked sensitive", () => {
    const byKey = new Map(s3DriverOptions.map((o) => [o.key, o]));
    for (const key of ["access_key_id", "secret_access_key", "session_token"]) expect(byKey.get(key)?.sensitive).toBe(true);
    for (const key of ["provider", "region", "endpoint", "location_constraint", "acl", "force_path_style", "path"]) {
      expect(byKey.get(key)?.sensitive).toBe(false);
    }
    expect(byKey.get("provider")?.options).toContain("Cloudflare");
    expect(byKey.get("force_path_style")?.default).toBe("true");
  });

  test("bad configuration is refused up front", () => {
    expect(() => createS3Driver(config({ path: "" }))).toThrow("path");
    expect(() => createS3Driver(config({ endpoint: "" }))).toThrow("endpoint");
    expect(() => createS3Driver(config({ provider: "NoSuchCloud" }))).toThrow("provider");
    expect(() => createS3Driver(config({ secret_access_key: "" }))).toThrow("secret_access_key");
    expect(() => createS3Driver(config({ endpoint: "http://user:pw@127.0.0.1:1" }))).toThrow("用户名或密码");
  });
});

describe("s3 driver: failures", () => {
  test("a wrong secret fails the probe with a Chinese error that does not leak credentials", async () => {
    const secret = "totally-wrong-Secret/Value+123";
    const driver = createS3Driver(config({ secret_access_key: secret }));
    const err = await driver.probe(false).then(
      () => null,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toContain("S3 请求失败: 403 SignatureDoesNotMatch");
    expect(err!.message).toMatch(/[\u4e00-\u9fff]/);
    for (const secretPart of [secret, TEST_CREDENTIALS.secretAccessKey]) expect(err!.message).not.toContain(secretPart);
    expect(err!.message).not.toContain(TEST_CREDENTIALS.accessKeyId);
    expect(String(err!.stack)).not.toContain(secret);
    // Deep probe and data operations fail the same way.
    await expect(driver.probe(true)).rejects.toThrow("SignatureDoesNotMatch");
    await expect(driver.put("x", new Uint8Array([1]), 1)).rejects.toThrow("403");
  });

  test("an upload carries Content-MD5, and a stream stored as other bytes fails the put by its ETag", async () => {
    const driver = createS3Driver(config({ path: "kura-test/md5" }));
    const before = s3.verified.length;
    await driver.put("bytes.bin", new Uint8Array([1, 2, 3]), 3);
    const put = s3.verified.slice(before).find((r) => r.method === "PUT");
    expect(put?.headers["content-md5"]).toBe(
      createHash("md5")
        .update(new Uint8Array([1, 2, 3]))
        .digest("base64"),
    );
    expect(put?.headers.authorization).toContain("content-md5");

    // A streamed upload (UNSIGNED-PAYLOAD, so no payload hash) whose bytes change on the way:
    // the peer stores what it got and answers with that MD5 as the ETag.
    const flipOne = (input: string | URL | Request, init?: RequestInit) => {
      if (init?.method !== "PUT" || !(init.body instanceof ReadableStream)) return fetch(input, init);
      let flipped = false;
      const body = init.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            const copy = chunk.slice();
            if (!flipped && copy.length > 0) {
              copy[0]! ^= 0xff;
              flipped = true;
            }
            controller.enqueue(copy);
          },
        }),
      );
      return fetch(input, { ...init, body });
    };
    const tampered = createS3Driver(config({ path: "kura-test/md5" }), { fetch: flipOne });
    const size = 300_000;
    const err = await tampered.put("stream.bin", new Blob([new Uint8Array(size).fill(5)]).stream(), size).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toBe("S3 上传校验失败：服务器保存的数据与发送的不一致（ETag 与 MD5 不符）");
    // Control: the same stream through an honest path is accepted.
    await driver.put("stream.bin", new Blob([new Uint8Array(size).fill(5)]).stream(), size);
  });

  test("the test peer verifies Content-MD5 as S3 does (400 BadDigest, nothing stored)", async () => {
    const url = new URL(`${s3.endpoint}/kura-test/md5/raw.bin`);
    const put = (md5: string) => {
      const signed = aws4.sign(
        {
          method: "PUT",
          host: url.host,
          path: url.pathname,
          service: "s3",
          region: "us-east-1",
          headers: { "Content-MD5": md5, "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD", "Content-Length": "7" },
        },
        TEST_CREDENTIALS,
      );
      const headers = Object.fromEntries(Object.entries(signed.headers ?? {}).filter(([name]) => name.toLowerCase() !== "host")) as Record<string, string>;
      return fetch(url, { method: "PUT", headers, body: "payload" });
    };
    const wrong = await put(createHash("md5").update("other").digest("base64"));
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain("<Code>BadDigest</Code>");
    expect(await listKeys(createS3Driver(config({ path: "kura-test/md5" })), "raw")).toEqual([]);
    expect((await put(createHash("md5").update("payload").digest("base64"))).status).toBe(200);
  });

  test("a failing upload source is reported as itself, not as a connection error", async () => {
    const driver = createS3Driver(config({ path: "kura-test/src-fail" }));
    const short = new Blob([new Uint8Array(500)]).stream();
    await expect(driver.put("short.bin", short, 1000)).rejects.toThrow("对象大小不符");
    let sent = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ === 3) return controller.error(new Error("client went away"));
        controller.enqueue(new Uint8Array(64 * 1024));
      },
    });
    await expect(driver.put("failing.bin", failing, 1024 * 1024)).rejects.toThrow("client went away");
    expect(await listKeys(driver, "")).toEqual([]);
  });

  test("an unknown access key and a missing bucket are told apart", async () => {
    await expect(createS3Driver(config({ access_key_id: "NOPE" })).probe(false)).rejects.toThrow("InvalidAccessKeyId");
    const noBucket = createS3Driver(config({ path: "no-such-bucket" }));
    await expect(noBucket.probe(false)).rejects.toThrow("404 NoSuchBucket");
    // A missing bucket is a broken channel, not a missing object.
    const err = await noBucket.get("k").then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.name).not.toBe("ObjectNotFoundError");
    expect(err?.message).toContain("NoSuchBucket");
  });

  test("createBucket makes the bucket usable (with location_constraint) and is repeatable", async () => {
    const driver = createS3Driver(config({ path: "fresh-bucket/pre", location_constraint: "us-east-1" }));
    await expect(driver.probe(false)).rejects.toThrow("NoSuchBucket");
    await driver.createBucket();
    await driver.probe(true);
    await driver.createBucket();
    expect(await readdir(join(scratch, "store"))).toContain("fresh-bucket");
  });

  test("server stopped: probe fails; server back on the same port: probe succeeds and data is still there", async () => {
    const directory = join(scratch, "restartable");
    let server: RunningS3 = await startS3({ directory, buckets: ["restart"] });
    const port = server.port;
    const driver = createS3Driver(config({ endpoint: server.endpoint, path: "restart" }), { timeoutMs: 5000 });
    await driver.put("kept.bin", new Uint8Array([4, 5, 6]), 3);
    await driver.probe(false);

    await server.stop();
    const err = await driver.probe(false).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toStartWith("S3 连接失败");
    expect(err?.message).not.toContain(TEST_CREDENTIALS.secretAccessKey);
    await expect(driver.head("kept.bin")).rejects.toThrow("S3 连接失败");

    server = await startS3({ directory, port });
    try {
      await driver.probe(false);
      await driver.probe(true);
      expect(await readAll((await driver.get("kept.bin")).stream)).toEqual(new Uint8Array([4, 5, 6]));
    } finally {
      await server.stop();
    }
  });

  test("a server that never answers times out instead of hanging", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const driver = createS3Driver(config({ endpoint: `http://127.0.0.1:${silent.port}` }), { timeoutMs: 150 });
      const started = Date.now();
      await expect(driver.probe(false)).rejects.toThrow("请求超时");
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      silent.stop(true);
    }
  });
});
