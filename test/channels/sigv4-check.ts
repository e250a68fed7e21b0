/**
 * An independent AWS SigV4 (header auth) verifier for tests. s3rver accepts any
 * V4 signature, so without this a driver signing wrongly, or with a wrong
 * secret, would pass against it while failing against real S3. Written from the
 * SigV4 spec (not with aws4, which the driver uses) and checked against the
 * captured client requests in /work/shared/s3.
 */
import { createHash, createHmac } from "node:crypto";

export interface SignedRequest {
  method: string;
  /** Raw request target as sent: percent-encoded path plus optional query. */
  url: string;
  /** [name, value] pairs as on the wire, duplicates kept. */
  headers: [string, string][];
}

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export type Verdict = { ok: true; canonicalRequest: string } | { ok: false; code: string; canonicalRequest?: string };

const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function canonicalQuery(query: string): string {
  if (!query) return "";
  const pairs = query
    .split("&")
    .filter((p) => p !== "")
    .map((p) => {
      const eq = p.indexOf("=");
      const [k, v] = eq < 0 ? [p, ""] : [p.slice(0, eq), p.slice(eq + 1)];
      return [rfc3986(decodeURIComponent(k)), rfc3986(decodeURIComponent(v))] as const;
    });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

export function verifySigV4(req: SignedRequest, creds: Credentials): Verdict {
  const header = (name: string) => req.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  const auth = header("authorization")[0];
  if (!auth?.startsWith("AWS4-HMAC-SHA256 ")) return { ok: false, code: "AccessDenied" };
  const fields = new Map(
    auth
      .slice("AWS4-HMAC-SHA256 ".length)
      .split(",")
      .map((part) => {
        const [k, ...v] = part.trim().split("=");
        return [k, v.join("=")] as const;
      }),
  );
  const [accessKeyId, date, region, service, terminator] = (fields.get("Credential") ?? "").split("/");
  if (accessKeyId !== creds.accessKeyId) return { ok: false, code: "InvalidAccessKeyId" };
  const signedHeaders = (fields.get("SignedHeaders") ?? "").split(";");
  if (!signedHeaders.includes("host") || terminator !== "aws4_request") return { ok: false, code: "AuthorizationHeaderMalformed" };
  const amzDate = header("x-amz-date")[0] ?? "";
  const payloadHash = header("x-amz-content-sha256")[0];
  if (!payloadHash || !amzDate.startsWith(date)) return { ok: false, code: "AuthorizationHeaderMalformed" };

  const q = req.url.indexOf("?");
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const canonicalHeaders = signedHeaders
    .map((name) => {
      // Identical duplicates (Go's http client can send Content-Length twice) count once.
      const values = [...new Set(header(name).map((v) => v.trim().replace(/\s+/g, " ")))];
      return `${name}:${values.join(",")}\n`;
    })
    .join("");
  const canonicalRequest = [
    req.method,
    path, // S3 signs the path exactly as sent (no normalisation, no re-encoding)
    canonicalQuery(q < 0 ? "" : req.url.slice(q + 1)),
    canonicalHeaders,
    signedHeaders.join(";"),
    payloadHash,
  ].join("\n");
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, createHash("sha256").update(canonicalRequest).digest("hex")].join("\n");
  let key: Buffer = createHmac("sha256", `AWS4${creds.secretAccessKey}`).update(date).digest();
  for (const part of [region, service, "aws4_request"]) key = createHmac("sha256", key).update(part).digest();
  const expected = createHmac("sha256", key).update(stringToSign).digest("hex");
  return expected === fields.get("Signature") ? { ok: true, canonicalRequest } : { ok: false, code: "SignatureDoesNotMatch", canonicalRequest };
}
