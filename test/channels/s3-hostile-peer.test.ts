/**
 * The S3 driver against peers that answer badly (channel audit 2: H1, M1, M2, H3, L2): oversized
 * list pages and error bodies, listings that never progress, 200 answers that are not a listing,
 * an upload stored as other bytes, a connection closed mid-body. Each peer is `FakeS3`
 * (`fakes/s3.ts`) or, for a broken connection, a raw socket.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createS3Driver } from "../../src/channels/drivers/s3.ts";
import { readAll } from "./conformance.ts";
import { FakeS3, listResponse } from "./fakes/s3.ts";

const MiB = 1024 * 1024;
const peer = new FakeS3();
afterAll(() => peer.stop());

let bucketCounter = 0;
/** A driver on a bucket of its own, so hooks and request counts of one test stay apart. */
function driverOnNewBucket() {
  const bucket = `b${++bucketCounter}`;
  const driver = createS3Driver(
    { provider: "Other", endpoint: peer.endpoint, region: "us-east-1", access_key_id: "AK", secret_access_key: "SK", path: bucket },
    { timeoutMs: 10_000 },
  );
  return { bucket, driver };
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error("expected a failure");
    },
    (err: Error) => err,
  );
}

async function listAll(driver: ReturnType<typeof createS3Driver>): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of driver.list("")) keys.push(o.key);
  return keys;
}

/** `peer.sent` once it stopped growing: what the peer produced before Kura stopped reading. */
async function settledSent(): Promise<number> {
  let last = -1;
  while (peer.sent !== last) {
    last = peer.sent;
    await Bun.sleep(200);
  }
  return last;
}

describe("bodies are read only as far as a sound answer goes (H1)", () => {
  test("a list page past 8 MiB fails in Chinese; the peer's endless page is not read to its end", async () => {
    const { driver } = driverOnNewBucket();
    peer.sent = 0;
    // 256 MiB offered; the driver used to read all of it (and 1.5 GB took RSS past 4 GB).
    peer.onList = () => new Response(peer.endless("<ListBucketResult><IsTruncated>false</IsTruncated>", "<X>padding</X>", 256 * MiB));
    try {
      expect((await failure(driver.probe(false))).message).toBe("S3 列表的响应超过 8 MiB，已停止读取（服务端可能异常）");
      const sent = await settledSent();
      expect(sent).toBeLessThan(40 * MiB);
    } finally {
      peer.onList = undefined;
    }
  });

  test("an error body is read as a 64 KiB prefix: its code is still found, the rest is not read", async () => {
    const { driver } = driverOnNewBucket();
    peer.sent = 0;
    peer.onList = () => new Response(peer.endless("<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>", "x", 256 * MiB), { status: 503 });
    try {
      expect((await failure(driver.probe(false))).message).toBe("S3 请求失败: 503 SlowDown (请求过于频繁)");
      const sent = await settledSent();
      expect(sent).toBeLessThan(40 * MiB);
    } finally {
      peer.onList = undefined;
    }
  });
});

describe("a listing that makes no progress fails instead of paging forever (M1)", () => {
  /** The hook answers `page(n)` for request n, and a final page after 50 so an unguarded loop ends. */
  async function listing(page: (n: number) => Response) {
    const { bucket, driver } = driverOnNewBucket();
    peer.onList = (req) => {
      const n = peer.lists(req.bucket).length;
      return n > 50 ? listResponse([], false) : page(n);
    };
    try {
      const err = await failure(listAll(driver));
      return { message: err.message, requests: peer.lists(bucket).length };
    } finally {
      peer.onList = undefined;
    }
  }

  test("the same continuation token again", async () => {
    const result = await listing((n) => listResponse([{ key: `k${n}`, size: 1 }], true, "<NextContinuationToken>same</NextContinuationToken>"));
    expect(result).toEqual({ message: "S3 列表响应格式无效：分页没有进展（重复的续传标记）", requests: 2 });
  });

  test("a V1 answer (no token) whose pages end on the same key: the same marker again", async () => {
    const result = await listing((n) =>
      listResponse(
        [
          { key: `a${n}`, size: 1 },
          { key: "z", size: 1 },
        ],
        true,
      ),
    );
    expect(result).toEqual({ message: "S3 列表响应格式无效：分页没有进展（重复的续传标记）", requests: 2 });
  });

  test("the same page under a fresh token each time", async () => {
    const result = await listing((n) => listResponse([{ key: "a", size: 1 }], true, `<NextContinuationToken>t${n}</NextContinuationToken>`));
    expect(result).toEqual({ message: "S3 列表响应格式无效：分页没有进展（重复返回同一页）", requests: 2 });
  });

  test("empty truncated pages under fresh tokens: a thousand are allowed (AWS sends some), then it fails", async () => {
    const { bucket, driver } = driverOnNewBucket();
    peer.onList = (req) => {
      const n = peer.lists(req.bucket).length;
      return n > 1500 ? listResponse([], false) : listResponse([], true, `<NextContinuationToken>t${n}</NextContinuationToken>`);
    };
    try {
      expect((await failure(listAll(driver))).message).toBe("S3 列表响应格式无效：连续 1000 页没有条目，分页没有进展");
      expect(peer.lists(bucket).length).toBe(1001);
    } finally {
      peer.onList = undefined;
    }
  });

  test("control: a sound listing over several pages still works", async () => {
    const { bucket } = driverOnNewBucket();
    const paged = createS3Driver(
      { provider: "Other", endpoint: peer.endpoint, region: "us-east-1", access_key_id: "AK", secret_access_key: "SK", path: bucket, list_chunk: "2" },
      {},
    );
    for (const k of ["a", "b", "c", "d", "e"]) await paged.put(k, new Uint8Array([1]), 1);
    expect(await listAll(paged)).toEqual(["a", "b", "c", "d", "e"]);
    expect(peer.lists(bucket).length).toBe(3);
  });
});

describe("a 200 answer that is not a complete ListBucketResult is an error, not an empty listing (M2)", () => {
  for (const [name, body] of [
    ["an HTML page", "<html><body>Service temporarily unavailable</body></html>"],
    ["a page cut off mid-way", "<ListBucketResult><Contents><Key>x</Key><Size>1</Size>"],
    ["another document", "<?xml version='1.0'?><Error><Code>InternalError</Code></Error>"],
    ["an empty body", ""],
  ] as const) {
    test(name, async () => {
      const { driver } = driverOnNewBucket();
      peer.onList = () => new Response(body, { headers: { "content-type": "text/html" } });
      try {
        expect((await failure(driver.probe(false))).message).toStartWith("S3 列表响应格式无效：");
        expect((await failure(listAll(driver))).message).toStartWith("S3 列表响应格式无效：");
      } finally {
        peer.onList = undefined;
      }
    });
  }
});

describe("uploads are checked against what the peer stored (H3)", () => {
  test("bytes go out with Content-MD5; a wrong 32-hex ETag fails the put", async () => {
    const { bucket, driver } = driverOnNewBucket();
    const bytes = new Uint8Array([1, 2, 3, 4]);
    await driver.put("ok.bin", bytes, 4);
    expect(peer.keys(bucket)).toEqual(["ok.bin"]);
    // The peer stores something other than what was sent, and says so in its ETag.
    peer.onPut = (req) => {
      peer.objects.set(`${req.bucket}/${req.key}`, new Uint8Array([0xee]));
      return new Response(null, { headers: { etag: `"${"0".repeat(32)}"` } });
    };
    try {
      expect((await failure(driver.put("bad.bin", bytes, 4))).message).toBe("S3 上传校验失败：服务器保存的数据与发送的不一致（ETag 与 MD5 不符）");
      const stream = new Blob([new Uint8Array(200_000)]).stream();
      expect((await failure(driver.put("bad-stream.bin", stream, 200_000))).message).toStartWith("S3 上传校验失败");
    } finally {
      peer.onPut = undefined;
    }
    // The wrong objects were removed, not left for a listing, a drain or a read to find.
    expect(peer.keys(bucket)).toEqual(["ok.bin"]);
  });

  test("ETags that are not an MD5 by design are not compared: multipart-style, a provider's own hash, SSE-KMS, none", async () => {
    const { driver } = driverOnNewBucket();
    const answers = [
      { etag: `"${"a".repeat(32)}-2"` },
      { etag: '"FhbTAFa2CK3Mp7pMazBnUFkb9BkX"' },
      { etag: `"${"0".repeat(32)}"`, "x-amz-server-side-encryption": "aws:kms" },
      { etag: `"${"0".repeat(32)}"`, "x-amz-server-side-encryption-customer-algorithm": "AES256" },
      {} as Record<string, string>,
    ];
    for (const headers of answers) {
      peer.onPut = () => new Response(null, { headers });
      try {
        await driver.put("x.bin", new Uint8Array([9]), 1);
        await driver.put("y.bin", new Blob([new Uint8Array(100_000)]).stream(), 100_000);
      } finally {
        peer.onPut = undefined;
      }
    }
    // An uppercase MD5 (Alibaba OSS) is the same MD5.
    peer.onPut = (_req, body) => new Response(null, { headers: { etag: `"${new Bun.CryptoHasher("md5").update(body).digest("hex").toUpperCase()}"` } });
    try {
      await driver.put("z.bin", new Blob([new Uint8Array(100_000).fill(7)]).stream(), 100_000);
    } finally {
      peer.onPut = undefined;
    }
  });
});

describe("a body broken off mid-way fails in Chinese, without the runtime's English (L2)", () => {
  /** Answers every request with the headers and the start of a body, then closes the connection. */
  function cutOffPeer(head: string) {
    return Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(socket) {
          socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: 100000\r\n\r\n${head}`);
          setTimeout(() => socket.end(), 20);
        },
      },
    });
  }

  test("a list page and an object body", async () => {
    const server = cutOffPeer("<ListBucketResult><IsTruncated>false</IsTruncated>");
    try {
      const endpoint = `http://127.0.0.1:${server.port}`;
      const driver = createS3Driver({ provider: "Other", endpoint, region: "us-east-1", access_key_id: "AK", secret_access_key: "SK", path: "b" });
      // The endpoint is configuration: not named (spec 6.3).
      const expected = "S3 连接失败: 连接被重置";
      expect((await failure(driver.probe(false))).message).toBe(expected);
      const got = await driver.get("img/x.png");
      expect((await failure(readAll(got.stream))).message).toBe(expected);
    } finally {
      server.stop(true);
    }
  });
});
