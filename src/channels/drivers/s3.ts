import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import { contentTypeOf } from "./content-type";
import { partialResult, rangeHeader, wholeResult } from "./http-range";
import type { HttpDriverOptions } from "./http-transport";
import { assertSafeKey, assertSafePrefix } from "./object-key";
import { roundTripProbe } from "./round-trip-probe";
import { escapeMarkup } from "../../shared/markup";
import { S3Client } from "./s3/client";
import { resolveS3Settings, type S3Settings } from "./s3/config";
import { withReadErrorsMapped } from "./s3/body";
import { assertEtagMatches, contentMd5, md5Hex, md5Tap } from "./s3/checksum";
import { S3RequestError } from "./s3/errors";
import { listObjects } from "./s3/list";
import { uploadPayload } from "./sized-body";

export { s3DriverOptions, S3_PROVIDERS } from "./s3/config";

export type S3DriverOptions = HttpDriverOptions;

export interface S3Driver extends Driver {
  /** Creates the configured bucket (for `auto_create_bucket`); succeeds if we already own it. */
  createBucket(): Promise<void>;
}

export function createS3Driver(config: Record<string, string>, opts: S3DriverOptions = {}): S3Driver {
  return new S3ObjectDriver(resolveS3Settings(config), opts);
}

class S3ObjectDriver implements S3Driver {
  readonly kind = "s3";
  private readonly client: S3Client;
  private readonly timeoutMs: number;

  constructor(
    private readonly settings: S3Settings,
    opts: S3DriverOptions,
  ) {
    this.client = new S3Client(settings, opts.fetch ?? fetch);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  private fullKey(key: string): string {
    assertSafeKey(key);
    return this.settings.prefix ? `${this.settings.prefix}/${key}` : key;
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const fullKey = this.fullKey(key);
    const headers: Record<string, string> = { "Content-Length": String(size), "Content-Type": contentTypeOf(key) };
    if (this.settings.acl) headers["x-amz-acl"] = this.settings.acl;
    if (this.settings.storageClass) headers["x-amz-storage-class"] = this.settings.storageClass;
    // A plain byte array (or empty body) can be retried and needs no size guard stream.
    const payload = await uploadPayload(body, size);
    let md5: () => string | undefined;
    let sent: ReadableStream<Uint8Array> | Uint8Array;
    if (payload instanceof Uint8Array) {
      headers["Content-MD5"] = contentMd5(payload);
      const digest = md5Hex(payload);
      md5 = () => digest;
      sent = payload;
    } else {
      const tap = md5Tap(payload, size);
      md5 = tap.digest;
      sent = tap.stream;
    }
    const response = await this.client.send({
      method: "PUT",
      key: fullKey,
      headers,
      body: sent,
      // A slow uplink must not fail a large upload: allow ~1 s per 64 KiB on top.
      timeoutMs: this.timeoutMs + Math.ceil(size / 65536) * 1000,
    });
    await response.body?.cancel();
    try {
      assertEtagMatches(response, md5());
    } catch (err) {
      // The peer now holds other bytes under this key (or a cut-off object): remove them, so
      // nothing lists, drains or serves them until a retry overwrites the key. A failed delete
      // changes nothing of the answer: the upload has failed either way.
      await this.delete(key).catch(() => undefined);
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const fullKey = this.fullKey(key);
    const headers: Record<string, string> = {};
    if (range) headers.Range = rangeHeader(range);
    let response: Response;
    try {
      response = await this.client.send({ method: "GET", key: fullKey, headers, timeoutMs: this.timeoutMs });
    } catch (err) {
      if (err instanceof S3RequestError && err.status === 404 && err.code !== "NoSuchBucket") throw new ObjectNotFoundError(key);
      throw err;
    }
    const stream = response.body ? withReadErrorsMapped(response.body) : new Blob([]).stream();
    // Some S3 clones mis-handle e.g. "bytes=0-0" and send more: the 206 is checked.
    if (response.status === 206 && range) return partialResult(stream, response.headers.get("content-range"), range, "S3");
    const length = Number(response.headers.get("content-length") ?? "NaN");
    if (!Number.isSafeInteger(length)) {
      await stream.cancel();
      throw new Error("S3 响应缺少 Content-Length");
    }
    return wholeResult(stream, length, range);
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const response = await this.client.send({ method: "HEAD", key: this.fullKey(key), accept: [404], timeoutMs: this.timeoutMs });
    if (response.status === 404) return null;
    const size = Number(response.headers.get("content-length") ?? "NaN");
    if (!Number.isSafeInteger(size)) throw new Error("S3 响应缺少 Content-Length");
    const modifiedHeader = response.headers.get("last-modified");
    const modified = modifiedHeader ? new Date(modifiedHeader) : undefined;
    return { key, size, modified: modified && !Number.isNaN(modified.getTime()) ? modified : undefined };
  }

  async delete(key: string): Promise<void> {
    const response = await this.client.send({ method: "DELETE", key: this.fullKey(key), accept: [404], timeoutMs: this.timeoutMs });
    await response.body?.cancel();
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    const base = this.settings.prefix ? `${this.settings.prefix}/` : "";
    for await (const object of this.listRaw(base + prefix, this.settings.listChunk)) {
      if (!object.key.startsWith(base)) continue;
      yield { ...object, key: object.key.slice(base.length) };
    }
  }

  private listRaw(fullPrefix: string, pageSize: number): AsyncGenerator<ObjectInfo> {
    return listObjects(this.client, fullPrefix, pageSize, this.timeoutMs);
  }

  async probe(deep: boolean): Promise<void> {
    // Listing one key checks endpoint, credentials, bucket and read permission at once.
    for await (const _ of this.listRaw(this.settings.prefix ? `${this.settings.prefix}/` : "", 1)) break;
    if (deep) await roundTripProbe(this, "S3");
  }

  async createBucket(): Promise<void> {
    const constraint = this.settings.locationConstraint;
    const body = constraint
      ? `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>${escapeMarkup(constraint)}</LocationConstraint></CreateBucketConfiguration>`
      : undefined;
    const headers: Record<string, string> = body ? { "Content-Type": "application/xml" } : {};
    if (this.settings.acl) headers["x-amz-acl"] = this.settings.acl;
    try {
      const response = await this.client.send({ method: "PUT", headers, body, timeoutMs: this.timeoutMs });
      await response.body?.cancel();
    } catch (err) {
      if (!(err instanceof S3RequestError)) throw err;
      if (err.code === "BucketAlreadyOwnedByYou") return;
      // Some servers answer BucketAlreadyExists even to the owner; if we can list
      // the bucket it is usable and "create" has nothing left to do.
      if (err.code === "BucketAlreadyExists") {
        const usable = await this.probe(false).then(
          () => true,
          () => false,
        );
        if (usable) return;
      }
      throw err;
    }
  }
}
