/**
 * Upload requests written by hand on a socket, for the body-timing rules: a request head and the
 * first body bytes, then silence (or more bytes when the test says so). fetch cannot stop half way
 * through a body with a declared Content-Length, and a raw socket shows exactly when the server
 * answers and whether it closes the connection.
 */
import { connect, type Socket } from "node:net";
import type { KuraServer } from "../helpers/server";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds from the first byte written to the complete answer. */
  ms: number;
}

export class RawRequest {
  /** The complete answer, or null if the server closed the connection without one. */
  readonly answer: Promise<RawAnswer | null>;
  private readonly started = Date.now();
  private closedFlag = false;

  private constructor(private readonly socket: Socket) {
    let got = Buffer.alloc(0);
    this.answer = new Promise((resolve) => {
      socket.on("data", (d: Buffer) => {
        got = Buffer.concat([got, d]);
        const parsed = parseAnswer(got, Date.now() - this.started);
        if (parsed) resolve(parsed);
      });
      socket.on("close", () => {
        this.closedFlag = true;
        resolve(parseAnswer(got, Date.now() - this.started));
      });
      socket.on("error", () => {});
    });
  }

  /** Connects and writes `head` (the request line and headers, without the blank line) and the first body bytes. */
  static open(server: KuraServer, head: string, first: Uint8Array | string = ""): Promise<RawRequest> {
    const { hostname, port } = new URL(server.url("/"));
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        const req = new RawRequest(socket);
        socket.write(`${head}\r\n\r\n`);
        if (first.length) socket.write(first);
        resolve(req);
      });
      socket.once("error", reject);
    });
  }

  send(bytes: Uint8Array | string) {
    this.socket.write(bytes);
  }

  /** True once the server (or `destroy`) closed the connection. */
  get closed() {
    return this.closedFlag;
  }

  /** The answer if it comes within `ms`, else undefined (the request is still waiting). */
  async within(ms: number): Promise<RawAnswer | null | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
    try {
      return await Promise.race([this.answer, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  destroy() {
    this.socket.destroy();
  }
}

function parseAnswer(got: Buffer, ms: number): RawAnswer | null {
  const end = got.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = got.subarray(0, end).toString("latin1").split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers["content-length"] ?? 0);
  if (got.length - end - 4 < length) return null;
  return { status: Number(lines[0]!.split(" ")[1]), headers, body: got.subarray(end + 4, end + 4 + length).toString("utf8"), ms };
}

/** A chunked-encoding frame of `data`. */
export const chunk = (data: Uint8Array | string) => {
  const bytes = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
  return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from("\r\n")]);
};

export const BOUNDARY = "kuraslowbody";

/** The head of a multipart part: a text field's value follows, or a file's bytes with `file`. */
export const partHead = (name: string, file?: string) =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\nContent-Type: image/png` : ""}\r\n\r\n`;

/** A whole text field of a multipart body. */
export const textPart = (name: string, value: string) => `${partHead(name)}${value}\r\n`;

export const MULTIPART = `multipart/form-data; boundary=${BOUNDARY}`;
