/**
 * A small S3 peer (path style, no signature check) that stores objects in memory and can be told
 * to misbehave: `onList` answers a bucket's ListObjects itself (HTML, a cut-off page, a loop, an
 * endless body), `onPut` the uploads. Everything else behaves like S3: ListObjectsV2 paging with
 * continuation tokens, `Content-MD5` checked (400 BadDigest), the ETag is the MD5, ranged GETs.
 * For what the s3rver harness cannot be made to do; drivers are otherwise tested against s3rver.
 */
const enc = new TextEncoder();

export interface FakeS3Request {
  method: string;
  bucket: string;
  key: string;
  query: URLSearchParams;
}

type Hook = (req: FakeS3Request, body: Uint8Array) => Response | undefined | Promise<Response | undefined>;

export class FakeS3 {
  /** "bucket/key" → bytes. */
  readonly objects = new Map<string, Uint8Array<ArrayBuffer>>();
  readonly requests: FakeS3Request[] = [];
  /** Bytes the peer's generated bodies (endless) have handed to the socket so far. */
  sent = 0;
  onList: Hook | undefined;
  onPut: Hook | undefined;
  private readonly server = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, fetch: (req) => this.handle(req) });

  get endpoint(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  stop() {
    this.server.stop(true);
  }

  keys(bucket: string): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(`${bucket}/`)).map((k) => k.slice(bucket.length + 1));
  }

  lists(bucket?: string): FakeS3Request[] {
    return this.requests.filter((r) => r.method === "GET" && !r.key && (bucket === undefined || r.bucket === bucket));
  }

  /** `head`, then `filler` repeated without end (up to `cap` bytes), each piece counted in `sent`. */
  endless(head: string, filler: string, cap = Number.POSITIVE_INFINITY): ReadableStream<Uint8Array> {
    const piece = enc.encode(filler.repeat(Math.ceil(65536 / filler.length)));
    let produced = 0;
    return new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          c.enqueue(enc.encode(head));
        },
        pull: (c) => {
          if (produced >= cap) return c.close();
          produced += piece.byteLength;
          this.sent += piece.byteLength;
          c.enqueue(piece);
        },
      },
      { highWaterMark: 0 },
    );
  }

  private async handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const [bucket = "", ...rest] = url.pathname.slice(1).split("/").map(decodeURIComponent);
    const req: FakeS3Request = { method: request.method, bucket, key: rest.join("/"), query: url.searchParams };
    this.requests.push(req);
    const body = new Uint8Array(await request.arrayBuffer());
    const id = `${bucket}/${req.key}`;
    if (request.method === "GET" && !req.key) return (await this.onList?.(req, body)) ?? this.list(req);
    if (request.method === "PUT") {
      const hooked = await this.onPut?.(req, body);
      if (hooked) return hooked;
      const md5 = request.headers.get("content-md5");
      if (md5 !== null && md5 !== new Bun.CryptoHasher("md5").update(body).digest("base64")) return s3Error(400, "BadDigest");
      if (req.key) this.objects.set(id, body);
      return new Response(null, { headers: { etag: `"${new Bun.CryptoHasher("md5").update(body).digest("hex")}"` } });
    }
    const stored = this.objects.get(id);
    if (request.method === "DELETE") {
      this.objects.delete(id);
      return new Response(null, { status: 204 });
    }
    if (!stored) return request.method === "HEAD" ? new Response(null, { status: 404 }) : s3Error(404, "NoSuchKey");
    if (request.method === "HEAD") return new Response(null, { headers: { "content-length": String(stored.byteLength) } });
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.get("range") ?? "");
    if (!range) return new Response(stored);
    const start = Number(range[1]);
    const end = range[2] ? Math.min(Number(range[2]), stored.byteLength - 1) : stored.byteLength - 1;
    return new Response(stored.slice(start, end + 1), { status: 206, headers: { "content-range": `bytes ${start}-${end}/${stored.byteLength}` } });
  }

  /** ListObjectsV2 (the token is the last key of the page) or V1 (`marker`), sorted like S3. */
  private list(req: FakeS3Request): Response {
    const prefix = req.query.get("prefix") ?? "";
    const max = Number(req.query.get("max-keys") ?? 1000);
    const after = req.query.get("continuation-token") ?? req.query.get("marker") ?? "";
    const all = this.keys(req.bucket)
      .filter((k) => k.startsWith(prefix) && k > after)
      .sort();
    const page = all.slice(0, max);
    const truncated = all.length > max;
    const token = truncated ? `<NextContinuationToken>${xml(page.at(-1)!)}</NextContinuationToken>` : "";
    return listResponse(
      page.map((k) => ({ key: k, size: this.objects.get(`${req.bucket}/${k}`)!.byteLength })),
      truncated,
      token,
    );
  }
}

export function xml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;");
}

/** A ListBucketResult of `objects`; `extra` goes in verbatim (a token, a marker). */
export function listResponse(objects: { key: string; size: number }[], truncated: boolean, extra = ""): Response {
  const contents = objects
    .map((o) => `<Contents><Key>${xml(o.key)}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><Size>${o.size}</Size></Contents>`)
    .join("");
  return new Response(
    `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>${truncated}</IsTruncated>${contents}${extra}</ListBucketResult>`,
    { headers: { "content-type": "application/xml" } },
  );
}

export function s3Error(status: number, code: string): Response {
  return new Response(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>fake</Message></Error>`, {
    status,
    headers: { "content-type": "application/xml" },
  });
}
