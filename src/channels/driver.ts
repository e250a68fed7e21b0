/**
 * The contract every storage backend implements. Keys are '/'-separated
 * relative paths ("ab/cd/<sha256>.jpg", "_kura/backups/…"); a driver maps them
 * under its own configured `path` and must never let a key escape it.
 */
export interface ObjectInfo {
  key: string;
  size: number;
  modified?: Date;
}

/** Inclusive byte range, like HTTP's `Range: bytes=start-end`; end omitted = to the end. */
export interface ByteRange {
  start: number;
  end?: number;
}

export interface GetResult {
  stream: ReadableStream<Uint8Array>;
  /** Bytes in `stream` (the range length when ranged). */
  size: number;
  /** Size of the whole object. */
  totalSize: number;
  /**
   * The same bytes as a file on this machine (local disk, stored as is): an HTTP answer with it
   * goes out through sendfile(2) without passing through JS. `stream` is lazy, so a caller
   * that sends `file` leaves it unopened.
   */
  file?: Blob;
}

export interface Driver {
  /** Driver id as in rclone ("local", "s3", "webdav", "sftp", …). */
  readonly kind: string;
  /**
   * Streams `body` to `key`, replacing any existing object; `size` is exact. With `publishAfter`
   * (only passed to a driver that `stagesWrites`) the bytes may be written under a private name
   * at once, but `key` must not change before it resolves; if it rejects, nothing is published
   * and the put rejects with its reason.
   */
  put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number, publishAfter?: Promise<unknown>): Promise<void>;
  /**
   * True when the driver writes to a private staging name first and only then publishes the key
   * (the local disk: temp file, then rename), so `put` can overlap with the caller's own commit.
   */
  readonly stagesWrites?: boolean;
  /** Throws ObjectNotFoundError when absent. */
  get(key: string, range?: ByteRange): Promise<GetResult>;
  /** null when absent. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Idempotent: deleting an absent key succeeds. */
  delete(key: string): Promise<void>;
  /** Every object whose key starts with `prefix` (recursive). */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Throws when the backend cannot be used; `deep` also writes, reads back and deletes a probe object. */
  probe(deep: boolean): Promise<void>;
  /**
   * The object as a plain file on this machine, when the backend keeps it so (local disk, not
   * encrypted); null when absent. Lets libvips open and shrink-on-load a huge original without
   * the whole file passing through a JS buffer. Remote and encrypting drivers leave it out.
   */
  localFile?(key: string): string | null;
  close?(): Promise<void>;
}

export class ObjectNotFoundError extends Error {
  constructor(key: string) {
    super(`对象不存在: ${key}`);
    this.name = "ObjectNotFoundError";
  }
}
