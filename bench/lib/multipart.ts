// Pre-encoded multipart/form-data bodies, so the benchmark client spends (almost) no CPU
// per request: on a small machine the client shares cores with the server under test.
import { randomBytes } from "node:crypto";

export interface MultipartBody {
  contentType: string;
  body: Uint8Array<ArrayBuffer>;
}

/** One `file` part plus optional text fields, byte-for-byte what a browser form would send. */
export function multipartFile(bytes: Uint8Array, fileName: string, mime: string, fields: Record<string, string> = {}): MultipartBody {
  const boundary = `----kurabench${randomBytes(12).toString("hex")}`;
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(enc.encode(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  parts.push(enc.encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${fileName}"\r\nContent-Type: ${mime}\r\n\r\n`));
  parts.push(bytes);
  parts.push(enc.encode(`\r\n--${boundary}--\r\n`));
  const body = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    body.set(p, at);
    at += p.byteLength;
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, body };
}
