// Minimal typing for the parts of s3rver (untyped npm package) the tests use.
declare module "s3rver" {
  import type { Server } from "node:http";
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: { name: string; configs?: string[] }[];
  }
  class S3rver {
    constructor(options?: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    middleware: ((ctx: any, next: () => Promise<void>) => Promise<void>)[];
    httpServer?: Server;
    /** Koa's application events: "error" for every error a request raised. */
    on(event: "error", listener: (err: Error & { status?: number; code?: string }) => void): this;
    store: {
      putObject(object: any): Promise<{ size: number; md5: string }>;
      listObjects(bucket: string, options: any): Promise<{ objects: { key: string }[]; commonPrefixes: string[]; isTruncated: boolean }>;
      getResourcePath(bucket: string, key: string, resource: string): string;
      putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
      getMetadata(bucket: string, key: string): Promise<Record<string, string>>;
      deleteObject(bucket: string, key: string): Promise<void>;
    };
  }
  export default S3rver;
}

declare module "s3rver/lib/models/error.js" {
  /** s3rver answers a thrown S3Error with its code and status (BadDigest → 400) instead of a 500. */
  export default class S3Error extends Error {
    constructor(code: string, message: string, detail?: Record<string, string>);
  }
}
