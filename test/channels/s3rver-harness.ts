/**
 * A real S3 server for driver tests: s3rver on 127.0.0.1, storing into a
 * directory, inside the Bun test process. Three adjustments make it behave like
 * real S3 where the drivers depend on it:
 * - SigV4 verification in front, because s3rver accepts any V4 signature;
 * - uploads are committed only when the whole Content-Length arrived, match their
 *   `Content-MD5` (400 BadDigest, as S3; s3rver ignores the header), and only
 *   answered once on disk (s3rver stores truncated bodies of aborted uploads
 *   and answers before its write has finished);
 * - listings are sorted before paging (s3rver assumes readdir() is sorted), and a listing that meets a
 *   file removed while it walked (ENOENT, answered 500) is walked again, as is a metadata file read
 *   while it was being written;
 * - a delete leaves the key's directories in place (real S3 has none): s3rver removed the emptied
 *   parents, and a put into the same "directory" racing that delete failed with ENOENT (500), e.g.
 *   a health probe and a channel test both writing under `_kura/probe/` at once;
 * - Bun's crypto lacks OpenSSL's "des" alias, which s3rver uses for
 *   ListObjectsV2 continuation tokens; it is mapped to its canonical "des-cbc".
 */
import crypto from "node:crypto";
import { mkdir, rename, unlink, writeFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { dirname } from "node:path";
import S3rver from "s3rver";
import S3Error from "s3rver/lib/models/error.js";
import { verifySigV4, type Credentials } from "./sigv4-check.ts";

interface UploadedObject {
  bucket: string;
  key: string;
  content: IncomingMessage | Buffer;
  metadata: Record<string, string>;
}
interface ListOptions {
  startAfter?: string;
  maxKeys?: number;
  prefix?: string;
  delimiter?: string;
}

for (const name of ["createCipheriv", "createDecipheriv"] as const) {
  const original = crypto[name] as (algorithm: string, ...rest: unknown[]) => unknown;
  (crypto as Record<string, unknown>)[name] = (algorithm: string, ...rest: unknown[]) => original(algorithm === "des" ? "des-cbc" : algorithm, ...rest);
}

export const TEST_CREDENTIALS: Credentials = {
  accessKeyId: "KURATESTKEYID",
  secretAccessKey: "kura-test-secret/Zq8+w2Xv",
};

export interface VerifiedRequest {
  method: string;
  url: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
}

export interface RunningS3 {
  port: number;
  endpoint: string;
  /** Requests whose signature verified, by method, to prove the checker is in the path. */
  verified: VerifiedRequest[];
  stop(): Promise<void>;
}

export async function startS3(opts: { directory: string; port?: number; buckets?: string[] }): Promise<RunningS3> {
  const server = new S3rver({
    address: "127.0.0.1",
    port: opts.port ?? 0,
    silent: true,
    directory: opts.directory,
    configureBuckets: (opts.buckets ?? []).map((name) => ({ name })),
  });
  commitOnlyCompleteUploads(server);
  sortListings(server);
  tolerateMetadataWrites(server);
  keepDirectoriesOnDelete(server);
  const verified: VerifiedRequest[] = [];
  server.middleware.unshift(async (ctx, next) => {
    const raw: string[] = ctx.req.rawHeaders;
    const headers: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) headers.push([raw[i], raw[i + 1]]);
    const verdict = verifySigV4({ method: ctx.method, url: ctx.req.url, headers }, TEST_CREDENTIALS);
    if (!verdict.ok) {
      ctx.status = 403;
      ctx.type = "application/xml";
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${verdict.code}</Code><Message>rejected by test verifier</Message></Error>`;
      return;
    }
    verified.push({ method: ctx.method, url: ctx.req.url, headers: Object.fromEntries(headers.map(([n, v]) => [n.toLowerCase(), v])) });
    // s3rver only knows its own built-in key; the request is verified, so let it
    // through as anonymous rather than have s3rver look our key up.
    delete ctx.req.headers.authorization;
    await next();
  });
  // An answer of 500 InternalError is a fault of the fake itself (s3rver, or these adjustments), not of
  // the client under test: its cause goes to stderr, which `silent` would otherwise swallow.
  // A client that went away (tests abort uploads on purpose) is not such a fault.
  const clientGone = (err: Error & { code?: string }) =>
    err.message === "aborted" || ["ECONNRESET", "EPIPE", "ERR_STREAM_PREMATURE_CLOSE"].includes(err.code ?? "") || err.message === "Premature close";
  server.on("error", (err) => {
    if (!(err instanceof S3Error) && (err.status ?? 500) >= 500 && !clientGone(err)) console.error(`s3rver 500: ${err.stack ?? err}`);
  });
  const address = await server.run();
  return {
    port: address.port,
    endpoint: `http://127.0.0.1:${address.port}`,
    verified,
    async stop() {
      // Keep-alive sockets from fetch would otherwise hold close() open.
      server.httpServer?.closeAllConnections();
      await server.close();
    },
  };
}

/**
 * Uploads: commit only a body of exactly Content-Length bytes (S3 answers
 * IncompleteBody otherwise) whose signed payload hash matches, and only answer once the bytes are on disk, via
 * temp file + rename so readers see the old or the new object, never a mix.
 * s3rver's own putObject responds before its write stream has finished.
 */
function commitOnlyCompleteUploads(server: S3rver): void {
  const store = server.store;
  store.putObject = async (object: UploadedObject) => {
    let body: Buffer;
    if (Buffer.isBuffer(object.content)) body = object.content;
    else {
      const req = object.content;
      const expected = Number(req.headers["content-length"]);
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      body = Buffer.concat(chunks);
      if (!Number.isSafeInteger(expected) || body.length !== expected) {
        throw new Error(`IncompleteBody: got ${body.length} of ${expected} bytes`);
      }
      // A signed payload hash must match the bytes (UNSIGNED-PAYLOAD opts out).
      const claimed = String(req.headers["x-amz-content-sha256"] ?? "");
      if (/^[0-9a-f]{64}$/i.test(claimed) && crypto.createHash("sha256").update(body).digest("hex") !== claimed.toLowerCase()) {
        throw new Error("XAmzContentSHA256Mismatch");
      }
      // As S3 does: the only integrity check of an UNSIGNED-PAYLOAD upload.
      const contentMd5 = req.headers["content-md5"];
      if (contentMd5 !== undefined && crypto.createHash("md5").update(body).digest("base64") !== contentMd5) {
        throw new S3Error("BadDigest", "The Content-MD5 you specified did not match what we received.");
      }
    }
    const objectPath = store.getResourcePath(object.bucket, object.key, "object");
    await mkdir(dirname(objectPath), { recursive: true });
    const temp = `${objectPath}.tmp-${crypto.randomBytes(6).toString("hex")}`;
    await writeFile(temp, body);
    await rename(temp, objectPath);
    const md5 = crypto.createHash("md5").update(body).digest("hex");
    await store.putMetadata(object.bucket, object.key, object.metadata, md5);
    return { size: body.length, md5 };
  };
}

/**
 * s3rver pages listings assuming readdir() returns names sorted, which Linux
 * filesystems do not: pages overlap and skip keys. List everything, then sort
 * (S3 order: UTF-8 bytes) and page here.
 */
function sortListings(server: S3rver): void {
  const store = server.store;
  const listObjects = store.listObjects.bind(store);
  store.listObjects = async (bucket: string, options: ListOptions) => {
    const all = await listTolerantly(() => listObjects(bucket, { ...options, startAfter: "", maxKeys: Infinity }));
    const after = options.startAfter ? Buffer.from(options.startAfter) : null;
    const objects = all.objects
      .filter((o) => !after || Buffer.compare(Buffer.from(o.key), after) > 0)
      .sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
    const maxKeys = options.maxKeys ?? Infinity;
    return { ...all, objects: objects.slice(0, maxKeys), isTruncated: objects.length > maxKeys };
  };
}

/**
 * s3rver walks a listing with readdir() and then stat() of each name: a file that goes in between (a
 * put's temp file renamed into place, an object deleted, e.g. a channel probe's beside a backfill's
 * writes) fails the whole listing with ENOENT, answered 500. Real S3 lists whatever is there, so the
 * walk is tried again (the race lasts a moment).
 */
async function listTolerantly<T>(list: () => Promise<T>): Promise<T> {
  return again(list, (err) => (err as NodeJS.ErrnoException).code === "ENOENT");
}

/** `work` tried up to 5 times while it fails with a passing race of the fake (`transient`). */
async function again<T>(work: () => Promise<T>, transient: (err: unknown) => boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (!transient(err) || attempt >= 5) throw err;
      await Bun.sleep(2);
    }
  }
}

/**
 * s3rver writes an object's metadata.json in place, so a read beside that write (a listing, a GET of
 * another request) can parse half a file and answer 500: read again, as S3 would have answered with
 * the old or the new metadata.
 */
function tolerateMetadataWrites(server: S3rver): void {
  const store = server.store;
  const getMetadata = store.getMetadata.bind(store);
  store.getMetadata = (bucket: string, key: string) =>
    again(
      () => getMetadata(bucket, key),
      (err) => err instanceof SyntaxError,
    );
}

/** Deletes an object's files only; s3rver also removed its emptied parent directories (see the header). */
function keepDirectoriesOnDelete(server: S3rver): void {
  const store = server.store;
  store.deleteObject = async (bucket: string, key: string) => {
    await Promise.all(
      (["object", "object.md5", "metadata.json"] as const).map((kind) =>
        unlink(store.getResourcePath(bucket, key, kind)).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== "ENOENT") throw err;
        }),
      ),
    );
  };
}
