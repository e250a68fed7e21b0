/** A real Kura with an upload token and its S3 credential, for the /s3/ client tests. */
import { writeFileSync } from "node:fs";
import { S3Client } from "@aws-sdk/client-s3";
import { adminSession, type Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";

export interface S3Credential {
  access_key_id: string;
  secret_access_key: string;
  endpoint: string;
  region: string;
  bucket: string;
  url_prefix: string;
}

export interface S3Fixture {
  server: KuraServer;
  admin: Session;
  tokenId: number;
  cred: S3Credential;
}

export async function startS3Fixture(config: Record<string, unknown> = {}, env: Record<string, string> = {}): Promise<S3Fixture> {
  const server = await KuraServer.start({ env });
  const admin = await adminSession(server);
  if (Object.keys(config).length) await admin.json("PUT", "/api/admin/config", config);
  const token = await admin.json("POST", "/api/admin/tokens", { name: `s3-${Date.now()}` }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  return { server, admin, tokenId: token.id, cred };
}

export function sdkClient(cred: S3Credential, overrides: { secret?: string; accessKeyId?: string; maxAttempts?: number } = {}): S3Client {
  return new S3Client({
    endpoint: cred.endpoint,
    region: cred.region,
    forcePathStyle: true,
    credentials: { accessKeyId: overrides.accessKeyId ?? cred.access_key_id, secretAccessKey: overrides.secret ?? cred.secret_access_key },
    maxAttempts: overrides.maxAttempts ?? 1,
  });
}

/** A raw SigV4-signed request (aws4) to the fixture's server; `body` may be a stream for chunked uploads. */
export async function signedRequest(
  f: S3Fixture,
  method: string,
  path: string,
  opts: { body?: Uint8Array | string; headers?: Record<string, string>; stream?: ReadableStream<Uint8Array>; signal?: AbortSignal; cred?: S3Credential } = {},
): Promise<Response> {
  const { default: aws4 } = await import("aws4");
  const url = new URL(f.server.base);
  const cred = opts.cred ?? f.cred;
  const req = aws4.sign(
    {
      host: url.host,
      path,
      method,
      service: "s3",
      region: "us-east-1",
      headers: { ...opts.headers },
      body: opts.stream ? undefined : typeof opts.body === "string" || opts.body === undefined ? (opts.body ?? "") : Buffer.from(opts.body),
    },
    { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
  );
  const headers = req.headers as Record<string, string>;
  const body = opts.stream ?? (method === "GET" || method === "HEAD" ? undefined : opts.body);
  return fetch(`${f.server.base}${path}`, {
    method,
    headers,
    body: body as BodyInit | undefined,
    signal: opts.signal,
    ...(opts.stream ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** A second user with its own upload token (plaintext `token`) and S3 credential (for quota and isolation tests). */
export async function s3User(
  f: S3Fixture,
  name: string,
  fields: { quota_bytes?: number } = {},
): Promise<{ userId: string; tokenId: number; token: string; cred: S3Credential }> {
  const { Session } = await import("../helpers/client");
  const password = "user-password-1";
  const user = await f.admin.json("POST", "/api/admin/users", { name, password, role: "user", ...fields }, 201);
  const session = new Session(f.server);
  const login = await session.login(name, password);
  if (login.status !== 200) throw new Error(`login ${name}: ${login.status}`);
  const token = await session.json("POST", "/api/admin/tokens", { name: `s3-${name}` }, 201);
  const cred = await session.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  return { userId: user.id, tokenId: token.id, token: token.token, cred };
}

/** An rclone config with one S3 remote `k:` pointing at the fixture's credential (path style). */
export function writeRcloneS3Config(f: S3Fixture, configPath: string): void {
  writeFileSync(
    configPath,
    [
      "[k]",
      "type = s3",
      "provider = Other",
      `access_key_id = ${f.cred.access_key_id}`,
      `secret_access_key = ${f.cred.secret_access_key}`,
      `endpoint = ${f.cred.endpoint}`,
      `region = ${f.cred.region}`,
      "force_path_style = true",
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
}

/**
 * The real rclone with a config for the fixture's credential as remote `k`; AWS_CA_BUNDLE and RCLONE_* are kept out of its
 * environment. No retries by default (a failure shows at once); `lowLevelRetries` for a test of what rclone's retries meet.
 */
export function rcloneFor(f: S3Fixture, configPath: string, { lowLevelRetries = 1 } = {}) {
  writeRcloneS3Config(f, configPath);
  return async (args: string[]): Promise<{ code: number; out: string; err: string }> => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "AWS_CA_BUNDLE" && !k.startsWith("RCLONE_")) env[k] = v;
    const proc = Bun.spawn(["rclone", "--config", configPath, "--retries", "1", "--low-level-retries", String(lowLevelRetries), ...args], {
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code: await proc.exited, out, err };
  };
}

/** The `<Code>` of an S3 error document. */
export const errorCodeOf = (xml: string) => /<Code>([^<]+)<\/Code>/.exec(xml)?.[1];

/** The `<Message>` of an S3 error document. */
export const errorMessageOf = (xml: string) => /<Message>([^<]*)<\/Message>/.exec(xml)?.[1];

/** The `<Code>` of an S3 error response (reads the body). */
export const responseCodeOf = async (res: Response) => errorCodeOf(await res.text());
