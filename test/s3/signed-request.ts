/** Raw SigV4-signed requests (aws4) against a Kura /s3/ endpoint, with an optional way to send other bytes than were signed. */
import aws4 from "aws4";
import type { S3Credential } from "./s3-setup";

export interface SignedOptions {
  body?: Uint8Array;
  headers?: Record<string, string>;
  /** Sent instead of `body` after signing (same length), to test the server's own digest check. */
  sendInstead?: Uint8Array;
}

export function signedS3(
  base: string,
  cred: Pick<S3Credential, "access_key_id" | "secret_access_key">,
  method: string,
  path: string,
  opts: SignedOptions = {},
): Promise<Response> {
  const url = new URL(base);
  const req = aws4.sign(
    { host: url.host, path, method, service: "s3", region: "us-east-1", headers: { ...opts.headers }, body: opts.body ? Buffer.from(opts.body) : "" },
    { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
  );
  const sent = opts.sendInstead ?? opts.body;
  const body = sent && (new Uint8Array(sent) as unknown as BodyInit);
  return fetch(`${base}${path}`, { method, headers: req.headers as Record<string, string>, body: method === "GET" || method === "HEAD" ? undefined : body });
}
