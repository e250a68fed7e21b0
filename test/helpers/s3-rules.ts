/**
 * The shared bench of the `/s3/` request rule tests (`unit/s3-request-*.test.ts`): a real context
 * with one upload token, the router's own Elysia `handle` (no server), requests signed as real
 * clients sign them (canonical URI = the raw path), and readers of the XML answers. The context's
 * parts are live bindings, set by `useS3RuleContext()`'s beforeAll in the file that calls it.
 */
import { afterAll, beforeAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { s3SecretFor, TokenRepo } from "../../src/auth/tokens";
import type { AppContext } from "../../src/context";
import { S3Error } from "../../src/s3/errors";
import { s3Routes } from "../../src/s3/router";
import { canonicalQuery, deriveSigningKey, formatAmzDate, hmac, parseQuery, sha256Hex } from "../../src/s3/sigv4-canonical";
import { rawTarget } from "../../src/shared/url-target";
import { hasChinese } from "../fuzz/fuzz-support";
import { openContext } from "./context";

export const ORIGIN = "http://kura.test";
export const EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e";
export const MD5 = "0123456789abcdef0123456789abcdef";

let dir: string;
let ctx: Awaited<ReturnType<typeof openContext>>;
export let app: AppContext;
export let routes: ReturnType<typeof s3Routes>;
export let userId: string;
export let tokenId: number;
export let accessKey: string;
export let secret: string;
export let blobId: number;

/** Opens the context before the calling file's tests and closes it after them. */
export function useS3RuleContext(): void {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kura-s3-request-rules-"));
    ctx = await openContext(dir);
    app = ctx.app;
    userId = app.db.query<{ id: string }, []>("SELECT id FROM users ORDER BY created_at LIMIT 1").get()!.id;
    const repo = new TokenRepo(app.db);
    const issued = repo.issue(userId, "s3-request-rules", 0);
    tokenId = issued.id;
    accessKey = issued.prefix;
    secret = s3SecretFor(app.key, repo.byId(issued.id)!);
    routes = s3Routes(app);
    blobId = Number(
      app.db
        .query(
          `INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES ('s', 'k', 'image/png', 1, 1, 1, 1, '2025-01-01 00:00:00', '${MD5}')`,
        )
        .run().lastInsertRowid,
    );
  });
  afterAll(() => {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  });
}

/** Stores image objects under `keys` for the token's user (no bytes: HEAD, listings and conditions never read them). */
export function storeKeys(keys: string[]) {
  const insert = app.db.query(
    "INSERT INTO images (id, blob_id, user_id, file_name, object_key, created_at) VALUES (?, ?, ?, 'x.png', ?, '2025-01-01 00:00:00')",
  );
  for (const key of keys) insert.run(`img-${key}`, blobId, userId, key);
}
export function clearKeys() {
  app.db.exec("DELETE FROM images; DELETE FROM s3_folder_markers");
}

/** The request as a client sends it, SigV4-signed (header auth, UNSIGNED-PAYLOAD) over the raw path and query the URL parser kept. */
export function signed(
  method: string,
  target: string,
  opts: { headers?: Record<string, string>; body?: string; key?: string; secret?: string; signPath?: string } = {},
): Request {
  const url = new Request(`${ORIGIN}${target}`).url; // the URL parser's form: non-ASCII escaped, dot segments resolved
  const { path, query } = rawTarget(url);
  const amzDate = formatAmzDate(Date.now());
  const headers: Record<string, string> = { host: "kura.test", "x-amz-date": amzDate, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" };
  for (const [name, value] of Object.entries(opts.headers ?? {})) headers[name.toLowerCase()] = value;
  const names = Object.keys(headers).sort();
  const canonical = [
    method,
    opts.signPath ?? path,
    canonicalQuery(parseQuery(query)),
    names.map((n) => `${n}:${headers[n]!.trim()}\n`).join(""),
    names.join(";"),
    "UNSIGNED-PAYLOAD",
  ].join("\n");
  const scope = `${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const signature = hmac(
    deriveSigningKey(opts.secret ?? secret, amzDate.slice(0, 8), "us-east-1", "s3"),
    ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n"),
  ).toString("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${opts.key ?? accessKey}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return new Request(url, { method, headers, body: opts.body });
}

export interface Answer {
  status: number;
  /** `<status> <error code | root element>`, `/V2` added to a ListObjectsV2 result, `-` for no body. */
  outcome: string;
  xml: string;
  headers: Headers;
}
export async function answer(res: Response): Promise<Answer> {
  const xml = await res.text();
  const code = /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
  const root = /^(?:<\?xml[^>]*\?>)?\s*<([A-Za-z]+)/.exec(xml)?.[1];
  const label = code ?? (root ? `${root}${xml.includes("<KeyCount>") ? "/V2" : ""}` : "-");
  return { status: res.status, outcome: `${res.status} ${label}`, xml, headers: res.headers };
}
export const send = async (request: Request) => answer(await routes.handle(request));
export const call = (method: string, target: string, opts: Parameters<typeof signed>[2] = {}) => send(signed(method, target, opts));
export const tag = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];
export const tags = (xml: string, name: string) => [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, "g"))].map((m) => m[1]!);

/** An S3Error as `<status> <code>`, flagged when its message is not Chinese; anything else is rethrown. */
export function errorLabel(err: unknown): string {
  if (!(err instanceof S3Error)) throw err;
  return `${err.status} ${err.code}${hasChinese(err.message) ? "" : " (message not Chinese)"}`;
}
/** The S3Error a call throws, or "ok". */
export function refusal(fn: () => unknown): string {
  try {
    fn();
    return "ok";
  } catch (err) {
    return errorLabel(err);
  }
}
