/**
 * A body refused unread (over `max_upload_mb` on an upload route, over 1 MiB on any other, over the
 * cap on `/s3/`) is answered and the connection closed, as nginx does after a 413: the client is
 * still sending a body nobody will read, and a connection left open for it would wait until the
 * idle timeout, out of step with its framing, and hold up a graceful stop meanwhile.
 */
import aws4 from "aws4";
import { expect, test } from "bun:test";
import { adminSession } from "../helpers/client";
import { KuraServer } from "../helpers/server";
import { RawRequest } from "./raw-upload.helpers";

const DECLARED = 50 * 1024 * 1024;

test("413s for bodies refused unread close the connection, and the server still stops promptly", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    const { token, id } = await admin.json<{ token: string; id: number }>("POST", "/api/admin/tokens", { name: "refused" }, 201);
    const cred = await admin.json<{ access_key_id: string; secret_access_key: string }>("POST", `/api/admin/tokens/${id}/s3-credential`);
    const { host } = new URL(server.base);
    const s3Head = () => {
      const signed = aws4.sign(
        {
          host,
          path: "/s3/kura/big.png",
          method: "PUT",
          service: "s3",
          region: "us-east-1",
          headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": String(DECLARED) },
        },
        { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
      );
      return ["PUT /s3/kura/big.png HTTP/1.1", ...Object.entries(signed.headers as Record<string, string>).map(([k, v]) => `${k}: ${v}`)].join("\r\n");
    };
    const cases: Array<[string, string, number]> = [
      [
        "console upload",
        `POST /api/admin/upload HTTP/1.1\r\nHost: ${host}\r\nCookie: ${admin.cookie}\r\nX-CSRF-Token: ${admin.csrf}\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: ${DECLARED}`,
        413,
      ],
      // The token surfaces close every answer anyway (tool-surfaces.ts); this one must too.
      [
        "token upload",
        `POST /api/upload HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: ${DECLARED}`,
        413,
      ],
      ["JSON route", `POST /api/admin/auth/login HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${DECLARED}`, 413],
      ["S3 PutObject", s3Head(), 400],
    ];
    for (const [what, head, status] of cases) {
      // The head and 64 KiB of the body; the rest never comes (the client would block sending it).
      const req = await RawRequest.open(server, head, new Uint8Array(64 * 1024));
      const answer = await req.answer;
      expect(`${what}: ${answer?.status} ${answer?.headers.connection}`).toBe(`${what}: ${status} close`);
      // The server closed it (within a second), rather than waiting for the 50 MB.
      for (let i = 0; i < 100 && !req.closed; i++) await Bun.sleep(10);
      expect(`${what}: closed ${req.closed}`).toBe(`${what}: closed true`);
    }
  } finally {
    const started = performance.now();
    await server.dispose();
    expect(performance.now() - started).toBeLessThan(10_000);
  }
}, 60_000);
