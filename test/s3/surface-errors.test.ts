/**
 * Answers of the /s3/ surface that S3 clients map by their XML `<Code>`, against a real Kura with one
 * delivery thread (connections land on either listener): methods S3 has no operation for, CORS
 * preflights, a Content-Length beyond what Bun itself would read, and keys over S3's 1024 UTF-8 bytes.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { connect } from "node:net";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import aws4 from "aws4";
import { useAdmin } from "../helpers/fixture";
import { makePng } from "../helpers/images";
import { sdkClient, signedRequest, type S3Credential, type S3Fixture } from "./s3-setup";

const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: "1" } });
let f: S3Fixture;
let png: Uint8Array;

beforeAll(async () => {
  const token = await admin.json("POST", "/api/admin/tokens", { name: "s3-surface" }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  f = { server, admin, tokenId: token.id, cred };
  png = await makePng(8, 8, 4);
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One request written byte for byte on its own connection (so requests spread over both listeners):
 * fetch sends neither TRACE nor a Content-Length it has no body for. Only the head is sent; the
 * answer must come before any body byte.
 */
function raw(method: string, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const url = new URL(server.base);
  const head = [`${method} ${path} HTTP/1.1`, `host: ${url.host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
  return new Promise((resolve, reject) => {
    let received: Buffer = Buffer.alloc(0);
    const socket = connect(Number(url.port), url.hostname, () => socket.write(head));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${method} ${path}: no complete answer in 15 s: ${received.toString()}`));
    }, 15_000);
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [statusLine, ...lines] = received.subarray(0, end).toString().split("\r\n");
      const fields = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      const length = Number(fields["content-length"] ?? 0);
      if (received.length - end - 4 < length) return;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: Number(statusLine!.split(" ")[1]), headers: fields, body: received.subarray(end + 4, end + 4 + length).toString() });
    });
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** The head of a SigV4-signed request whose body is never sent (UNSIGNED-PAYLOAD, as rclone's PUT). */
function signedHead(method: string, path: string, headers: Record<string, string>): Record<string, string> {
  const signed = aws4.sign(
    { host: new URL(server.base).host, path, method, service: "s3", region: "us-east-1", headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", ...headers } },
    { accessKeyId: f.cred.access_key_id, secretAccessKey: f.cred.secret_access_key },
  );
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(signed.headers as Record<string, string>)) if (k.toLowerCase() !== "host") out[k] = String(v);
  return out;
}

const xmlField = (body: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(body)?.[1];

/** An S3 XML error: its status, code and the request id it names (the same as the header's). */
function expectS3Error(answer: RawAnswer, status: number, code: string) {
  expect(answer.status, answer.body).toBe(status);
  expect(answer.headers["content-type"]).toBe("application/xml");
  expect(xmlField(answer.body, "Code")).toBe(code);
  expect(xmlField(answer.body, "Message")).toMatch(/[\u4e00-\u9fff]/);
  expect(xmlField(answer.body, "RequestId")).toBe(answer.headers["x-amz-request-id"]);
}

describe("methods S3 has no operation for", () => {
  const paths: [string, string][] = [
    ["/s3", "SERVICE"],
    ["/s3/", "SERVICE"],
    ["/s3/kura", "BUCKET"],
    ["/s3/kura/", "BUCKET"],
    ["/s3/kura/a.png", "OBJECT"],
    ["/s3/other/dir/b.png?acl", "OBJECT"],
  ];

  test("PATCH, PROPFIND, MKCOL, LOCK are 405 MethodNotAllowed XML with Allow, unauthenticated and unread", async () => {
    for (const method of ["PATCH", "PROPFIND", "MKCOL", "LOCK"]) {
      for (const [path, type] of paths) {
        const answer = await raw(method, path, { "content-length": "5000000000" });
        expectS3Error(answer, 405, "MethodNotAllowed");
        expect(xmlField(answer.body, "Method")).toBe(method);
        expect(xmlField(answer.body, "ResourceType")).toBe(type);
        expect(answer.headers.allow).toBe("GET, HEAD, PUT, POST, DELETE");
      }
    }
  });

  test("TRACE is 405 with S3's headers (Bun's fetch drops a TRACE answer's body on the delivery thread's handover)", async () => {
    for (const [path] of paths) {
      const answer = await raw("TRACE", path);
      expect(answer.status).toBe(405);
      expect(answer.headers["content-type"]).toBe("application/xml");
      expect(answer.headers["x-amz-request-id"]).toMatch(/^[0-9A-F]{16}$/);
      expect(answer.headers.allow).toBe("GET, HEAD, PUT, POST, DELETE");
      if (answer.body) expect(xmlField(answer.body, "Code")).toBe("MethodNotAllowed");
    }
  });

  test("OPTIONS is a CORS preflight refused as S3 refuses one without a CORS configuration", async () => {
    for (const [path, type] of paths) {
      const preflight = await raw("OPTIONS", path, { origin: "https://app.example", "access-control-request-method": "PUT" });
      expectS3Error(preflight, 403, "AccessForbidden");
      expect(xmlField(preflight.body, "Method")).toBe("PUT");
      expect(xmlField(preflight.body, "ResourceType")).toBe(type);
      // No CORS header: the browser must not go on.
      expect(Object.keys(preflight.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);
      expectS3Error(await raw("OPTIONS", path), 400, "BadRequest");
      expectS3Error(await raw("OPTIONS", path, { origin: "https://app.example", "access-control-request-method": "PATCH" }), 400, "BadRequest");
    }
  });

  test("other paths keep the app's own answers", async () => {
    // A known path of the app under another method is the app's 405.
    const me = await raw("PATCH", "/api/admin/me");
    expect([me.status, JSON.parse(me.body)]).toEqual([405, { error: "该接口不支持 PATCH 方法（可用：GET, HEAD）" }]);
    for (const [method, path] of [
      ["OPTIONS", "/s3x"],
      ["PATCH", "/s3kura/a.png"],
    ] as const) {
      const answer = await raw(method, path);
      expect(answer.status).toBe(404);
      expect(JSON.parse(answer.body)).toEqual({ error: "接口不存在" });
    }
    // The S3 methods are still routed as before.
    expect((await signedRequest(f, "HEAD", "/s3/kura")).status).toBe(200);
  });
});

describe("a declared Content-Length beyond anything Kura reads", () => {
  test("a signed PUT over max_upload_mb (within what Bun reads) is S3's EntityTooLarge XML on either listener, before a body byte", async () => {
    for (let i = 0; i < 16; i++) {
      const path = `/s3/kura/huge-${i}.png`;
      const answer = await raw("PUT", path, { ...signedHead("PUT", path, { "content-length": "9000000000" }), connection: "close" });
      expectS3Error(answer, 400, "EntityTooLarge");
    }
  });

  test("past the largest body Bun reads at all (~10 GiB) every route, /s3/ included, gets Bun's own 413 unread", async () => {
    for (let i = 0; i < 8; i++) {
      for (const path of ["/api/upload", "/api/admin/auth/login", "/api/v1/upload", "/nowhere", "/s3/kura/huge.png"]) {
        const answer = await raw("POST", path, { "content-length": "20000000000", "content-type": "application/json", connection: "close" });
        expect(answer.status, `${path}: ${answer.body}`).toBe(413);
      }
    }
  });
});

describe("keys over S3's 1024 UTF-8 bytes", () => {
  const encodeKey = (key: string) => key.split("/").map(encodeURIComponent).join("/");
  /** 341 × 图 = 1023 bytes: with `.png` 1027 bytes, though only 345 UTF-16 units. */
  const cjkTooLong = `${"图".repeat(341)}.png`;
  const cjkFits = `${"图".repeat(340)}.png`;
  const emojiFits = `${"😀".repeat(255)}.png`;

  const expectTooLong = async (res: Response, size: number) => {
    const body = await res.text();
    expect(res.status, body).toBe(400);
    expect(xmlField(body, "Code")).toBe("KeyTooLongError");
    expect(xmlField(body, "Size")).toBe(String(size));
    expect(xmlField(body, "MaxSizeAllowed")).toBe("1024");
  };

  test("PutObject: 1027 bytes of CJK (345 characters) and 1025 ASCII bytes are KeyTooLongError, nothing stored; 1024 bytes fit", async () => {
    expect(Buffer.byteLength(cjkTooLong)).toBe(1027);
    await expectTooLong(await signedRequest(f, "PUT", `/s3/kura/${encodeKey(cjkTooLong)}`, { body: png }), 1027);
    await expectTooLong(await signedRequest(f, "PUT", `/s3/kura/${"a".repeat(1025)}`, { body: png }), 1025);
    expect((await signedRequest(f, "HEAD", `/s3/kura/${encodeKey(cjkTooLong)}`)).status).toBe(404);
    for (const key of [cjkFits, emojiFits, "a".repeat(1024)]) {
      expect(Buffer.byteLength(key)).toBe(1024);
      expect((await signedRequest(f, "PUT", `/s3/kura/${encodeKey(key)}`, { body: png })).status).toBe(200);
      expect((await signedRequest(f, "HEAD", `/s3/kura/${encodeKey(key)}`)).status).toBe(200);
    }
  });

  test("the AWS SDK sees the typed error", async () => {
    const client = sdkClient(f.cred);
    const err = await client.send(new PutObjectCommand({ Bucket: "kura", Key: cjkTooLong, Body: png })).catch((e: Error) => e);
    expect((err as Error).name).toBe("KeyTooLongError");
    expect((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode).toBe(400);
  });

  test("folder markers, CopyObject's destination and CreateMultipartUpload count bytes too", async () => {
    await expectTooLong(await signedRequest(f, "PUT", `/s3/kura/${encodeKey(`${"图".repeat(342)}/`)}`), 1027);
    await expectTooLong(
      await signedRequest(f, "PUT", `/s3/kura/${encodeKey(cjkTooLong)}`, { headers: { "x-amz-copy-source": `kura/${encodeKey(cjkFits)}` } }),
      1027,
    );
    await expectTooLong(await signedRequest(f, "POST", `/s3/kura/${encodeKey(cjkTooLong)}?uploads=`), 1027);
    const uploads = await (await signedRequest(f, "GET", "/s3/kura?uploads=")).text();
    expect(uploads).not.toContain("<Upload>");
  });

  test("POST Object (browser form) counts bytes", async () => {
    const now = new Date();
    const amzDate = now
      .toISOString()
      .replace(/[-:]/g, "")
      .replace(/\.\d{3}/, "");
    const credential = `${f.cred.access_key_id}/${amzDate.slice(0, 8)}/${f.cred.region}/s3/aws4_request`;
    const fields: Record<string, string> = { key: cjkTooLong, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": credential, "x-amz-date": amzDate };
    const conditions = [{ bucket: "kura" }, ...Object.entries(fields).map(([k, v]) => ({ [k]: v }))];
    fields.policy = Buffer.from(JSON.stringify({ expiration: new Date(now.getTime() + 600_000).toISOString(), conditions })).toString("base64");
    const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();
    const signingKey = hmac(hmac(hmac(hmac(`AWS4${f.cred.secret_access_key}`, amzDate.slice(0, 8)), f.cred.region), "s3"), "aws4_request");
    fields["x-amz-signature"] = createHmac("sha256", signingKey).update(fields.policy).digest("hex");
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(png)], { type: "image/png" }), "a.png");
    await expectTooLong(await fetch(`${f.cred.endpoint}/kura`, { method: "POST", body: form }), 1027);
  });
});

describe("a client addressing the bucket in the host name (virtual-hosted style)", () => {
  test("its listing is refused with what to change, never answered with the bucket list (an empty-looking bucket that rclone sync mirrors as deletions)", async () => {
    // Before: 200 with <ListAllMyBucketsResult>, which clients parse as an empty, complete object listing.
    for (const query of ["list-type=2", "delimiter=&max-keys=1000&prefix=", "marker=a", "encoding-type=url"]) {
      const res = await signedRequest(f, "GET", `/s3/?${query}`);
      const body = await res.text();
      expect({ query, status: res.status }).toEqual({ query, status: 400 });
      expect(body).toContain("<Code>InvalidRequest</Code>");
      expect(body).toContain("path style");
      expect(body).not.toContain("ListAllMyBucketsResult");
    }
    // The real SDK, bucket in the host (its name pinned to this machine), gets an error, not an empty listing.
    const { ListObjectsV2Command, S3Client } = await import("@aws-sdk/client-s3");
    const { NodeHttpHandler } = await import("@smithy/node-http-handler");
    const http = await import("node:http");
    type Lookup = (host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => void;
    const lookup: Lookup = (_host, opts, cb) => (opts?.all ? cb(null, [{ address: "127.0.0.1", family: 4 }]) : cb(null, "127.0.0.1", 4));
    const vhost = new S3Client({
      endpoint: `http://kura-vhost.test:${new URL(server.base).port}/s3`,
      region: "us-east-1",
      forcePathStyle: false,
      requestHandler: new NodeHttpHandler({ httpAgent: new http.Agent({ lookup } as never) }),
      credentials: { accessKeyId: f.cred.access_key_id, secretAccessKey: f.cred.secret_access_key },
    });
    const listed = await vhost.send(new ListObjectsV2Command({ Bucket: "kura" })).then(
      (r) => ({ ok: true, keys: r.KeyCount }),
      (err: { name?: string; $metadata?: { httpStatusCode?: number } }) => ({ ok: false, code: err.name, status: err.$metadata?.httpStatusCode }),
    );
    expect(listed).toEqual({ ok: false, code: "InvalidRequest", status: 400 });
    // The bucket list itself still answers at the root.
    const root = await signedRequest(f, "GET", "/s3/");
    expect(root.status).toBe(200);
    expect(await root.text()).toContain("<Name>kura</Name>");
  });
});

describe("protocol edges real clients send (audit 12)", () => {
  const put = async (key: string) => {
    const res = await signedRequest(f, "PUT", `/s3/kura/${key}`, { body: png, headers: { "content-type": "image/png" } });
    expect(res.status).toBe(200);
    return res.headers.get("etag")!;
  };

  test("a versionId other than null is InvalidArgument on GET, HEAD and DELETE, and the live object is untouched", async () => {
    await put("edges/v.png");
    for (const method of ["GET", "HEAD", "DELETE"]) {
      const res = await signedRequest(f, method, "/s3/kura/edges/v.png?versionId=3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY");
      expect({ method, status: res.status }).toEqual({ method, status: 400 });
      if (method !== "HEAD") expect(await res.text()).toContain("<Code>InvalidArgument</Code>");
    }
    expect((await signedRequest(f, "GET", "/s3/kura/edges/v.png")).status).toBe(200);
    // `null` is the version every object of an unversioned bucket has.
    expect((await signedRequest(f, "GET", "/s3/kura/edges/v.png?versionId=null")).status).toBe(200);
  });

  test("If-Match / If-None-Match with a bare (unquoted) ETag, as the Java SDK v1 sends it", async () => {
    const etag = await put("edges/e.png");
    const bare = etag.replaceAll('"', "");
    expect((await signedRequest(f, "GET", "/s3/kura/edges/e.png", { headers: { "if-match": bare } })).status).toBe(200);
    expect((await signedRequest(f, "GET", "/s3/kura/edges/e.png", { headers: { "if-none-match": bare } })).status).toBe(304);
    expect((await signedRequest(f, "GET", "/s3/kura/edges/e.png", { headers: { "if-match": "0123" } })).status).toBe(412);
  });

  test("CopyObject accepts a fully URL-encoded x-amz-copy-source (encodeURIComponent of bucket/key)", async () => {
    await put("edges/src 1.png");
    const res = await signedRequest(f, "PUT", "/s3/kura/edges/copied.png", { headers: { "x-amz-copy-source": encodeURIComponent("kura/edges/src 1.png") } });
    expect(res.status).toBe(200);
    expect((await signedRequest(f, "HEAD", "/s3/kura/edges/copied.png")).status).toBe(200);
  });

  test("a Content-MD5 that is no base64 MD5 is InvalidDigest; a wrong one stays BadDigest", async () => {
    for (const [value, code] of [
      ["not-md5", "InvalidDigest"],
      [Buffer.alloc(16).toString("base64"), "BadDigest"],
    ] as const) {
      const res = await signedRequest(f, "PUT", "/s3/kura/edges/md5.png", { body: png, headers: { "content-md5": value } });
      expect({ value, status: res.status, code: (await res.text()).match(/<Code>(\w+)<\/Code>/)?.[1] }).toEqual({ value, status: 400, code });
    }
  });
});
