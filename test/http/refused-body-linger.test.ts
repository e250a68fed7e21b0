/**
 * An answer given before the body was read (a 413 on the declared length, a 401 before the upload's
 * bytes) closed the connection with the rest of the body unread: the kernel reset it, and a client
 * that sends the whole body before reading the answer (nginx and Caddy relaying an upload, Python's
 * http.client) failed its write with a broken pipe and never saw the answer (a 502 behind a proxy).
 * The rest is now read and dropped first (src/http/linger.ts).
 */
import { describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { useAdmin } from "../helpers/fixture";
import { RawRequest } from "./raw-upload.helpers";

interface Outcome {
  status?: number;
  error?: string;
}

/** Writes the whole request (head and body), then reads the answer's status line, as http.client does. */
function sendAllThenRead(base: string, head: string, bodyBytes: number): Promise<Outcome> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const received: Buffer[] = [];
    let writeError: string | undefined;
    const finish = () => {
      const text = Buffer.concat(received).toString("latin1");
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
      resolve(writeError || !status ? { error: writeError ?? "no answer" } : { status: Number(status) });
    };
    socket.on("data", (d: Buffer) => received.push(d));
    socket.on("error", (err) => {
      writeError = (err as NodeJS.ErrnoException).code ?? err.message;
    });
    socket.on("close", finish);
    socket.on("connect", async () => {
      socket.write(head);
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      for (let sent = 0; sent < bodyBytes && !socket.destroyed; sent += chunk.length) {
        if (!socket.write(chunk)) await new Promise((r) => socket.once("drain", r));
      }
    });
    setTimeout(() => socket.destroy(), 20_000);
  });
}

const uploadHead = (base: string, path: string, authorization: string, bodyBytes: number) =>
  [
    `POST ${path} HTTP/1.1`,
    `Host: ${new URL(base).host}`,
    `Authorization: ${authorization}`,
    "Content-Type: multipart/form-data; boundary=xyz",
    `Content-Length: ${bodyBytes}`,
    "",
    "",
  ].join("\r\n");

describe("a body refused before it is read", () => {
  const { server, admin } = useAdmin();

  test("a client that sends it all before reading gets the 413 or 401, not a reset", async () => {
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    try {
      const { token } = await admin.json("POST", "/api/admin/tokens", { name: "linger" }, 201);
      const size = 6 * 1024 * 1024;
      const outcomes: Record<string, Outcome[]> = { tooLarge: [], lskyTooLarge: [], badToken: [] };
      for (let i = 0; i < 4; i++) {
        outcomes.tooLarge!.push(await sendAllThenRead(server.base, uploadHead(server.base, "/api/upload", `Bearer ${token}`, size), size));
        outcomes.lskyTooLarge!.push(await sendAllThenRead(server.base, uploadHead(server.base, "/api/v1/upload", `Bearer ${token}`, size), size));
        outcomes.badToken!.push(
          await sendAllThenRead(server.base, uploadHead(server.base, "/api/upload", "Bearer kura_wrong", 3 * 1024 * 1024), 3 * 1024 * 1024),
        );
      }
      expect(outcomes).toEqual({
        tooLarge: Array(4).fill({ status: 413 }),
        // Lsky's clients read refusals from a 200 (status: false).
        lskyTooLarge: Array(4).fill({ status: 200 }),
        badToken: Array(4).fill({ status: 401 }),
      });
    } finally {
      await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    }
  }, 90_000);

  test("only upload paths wait for a refused body, a couple per address at most: a slow sender is answered at once beyond that", async () => {
    const head = (path: string, length: number) =>
      [
        `POST ${path} HTTP/1.1`,
        `Host: ${new URL(server.base).host}`,
        "Authorization: Bearer kura_wrong",
        "Content-Type: application/json",
        `Content-Length: ${length}`,
      ].join("\r\n");
    // A control-plane body over 1 MiB: refused at once, never waited for.
    const json = await RawRequest.open(server, head("/api/admin/auth/login", 50 * 1024 * 1024), "{");
    expect((await json.within(1000))?.status).toBe(413);
    json.destroy();
    // Uploads with a bad token that then send nothing: two from one address wait (for silence), the third does not.
    const held = await Promise.all([1, 2, 3].map(() => RawRequest.open(server, head("/api/upload", 3 * 1024 * 1024), "x")));
    try {
      const answered = await Promise.all(held.map((r) => r.within(1000)));
      expect(answered.map((a) => String(a?.status ?? "waiting")).sort()).toEqual(["401", "waiting", "waiting"]);
    } finally {
      for (const r of held) r.destroy();
    }
  });
});
