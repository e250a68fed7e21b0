/**
 * One HTTP request written byte for byte on its own TCP connection, for what fetch cannot send:
 * HTTP/1.0 without Host, an invalid Host, a target starting with `//` (fetch collapses it). The
 * request must make the server close the connection (HTTP/1.0, or `Connection: close`).
 */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
}

export async function rawRequest(base: string, request: string, timeoutMs = 10_000): Promise<RawResponse> {
  const { hostname, port } = new URL(base);
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms to ${JSON.stringify(request.split("\r\n")[0])}`)), timeoutMs);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    Bun.connect({
      hostname,
      port: Number(port),
      socket: {
        open: (socket) => void socket.write(request),
        data: (_socket, data) => void chunks.push(Buffer.from(data)),
        close: done,
        error: done,
      },
    }).catch(reject);
  });
  const all = Buffer.concat(chunks);
  const split = all.indexOf("\r\n\r\n");
  if (split < 0) throw new Error(`not an HTTP answer: ${JSON.stringify(all.toString("latin1").slice(0, 200))}`);
  const [statusLine = "", ...lines] = all.subarray(0, split).toString("latin1").split("\r\n");
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  let body: Buffer = all.subarray(split + 4);
  if (headers.get("transfer-encoding")?.includes("chunked")) body = unchunk(body);
  return { status: Number(statusLine.split(" ")[1]), headers, body, text: body.toString("utf8") };
}

function unchunk(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf("\r\n", at);
    const size = Number.parseInt(data.subarray(at, eol).toString("latin1"), 16);
    if (!(size > 0)) return Buffer.concat(parts);
    parts.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}
