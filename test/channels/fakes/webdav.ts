/**
 * A WebDAV peer that stores what it is sent and can be told to misbehave on reads, the way a
 * broken server, a bad disk or a proxy in between might: bytes flipped at the same length,
 * bytes appended to a chunked answer that carries no Content-Length (so only PROPFIND's size
 * bounds it), an endless chunked answer, an endless PROPFIND answer, or a PUT held open. Only
 * image keys (`img/…`) misbehave on GET, so the health probe's round trip stays sound.
 */

export type GetMode = "ok" | "chunked" | "flip" | "append" | "endless";

const enc = new TextEncoder();

function entry(href: string, size?: number): string {
  const props = size === undefined ? "<D:resourcetype><D:collection/></D:resourcetype>" : `<D:resourcetype/><D:getcontentlength>${size}</D:getcontentlength>`;
  return `<D:response><D:href>${href}</D:href><D:propstat><D:prop>${props}</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>`;
}

export class FakeDav {
  readonly files = new Map<string, Uint8Array<ArrayBuffer>>();
  private readonly dirs = new Set<string>(["/dav"]);
  getMode: GetMode = "ok";
  /** PROPFIND answers an endless multistatus, or starts one and then drops the connection. */
  propfindMode: "ok" | "endless" | "reset" = "ok";
  /** Holds every PUT of an image key until `releasePuts()`. */
  holdPuts = false;
  /** Answers nothing at all, to any request, until `releasePuts()` (a hung server behind a live socket). */
  hangAll = false;
  private held: (() => void)[] = [];
  /** Bytes of misbehaving bodies handed to the connection (endless answers stop when Kura cancels). */
  sentJunk = 0;
  /** GETs of image keys seen. */
  imageGets = 0;
  readonly server: ReturnType<typeof Bun.serve>;

  constructor() {
    this.server = Bun.serve({ port: 0, hostname: "127.0.0.1", idleTimeout: 0, fetch: (req) => this.handle(req) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}/dav/`;
  }

  releasePuts() {
    this.holdPuts = false;
    this.hangAll = false;
    for (const go of this.held.splice(0)) go();
  }

  stop() {
    this.releasePuts();
    this.server.stop(true);
  }

  private endless(prefix: string, piece: string): ReadableStream<Uint8Array> {
    const chunk = enc.encode(piece.repeat(Math.ceil(65536 / piece.length)));
    let first = true;
    return new ReadableStream<Uint8Array>({
      pull: (controller) => {
        if (first && prefix) controller.enqueue(enc.encode(prefix));
        first = false;
        this.sentJunk += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
  }

  private async handle(req: Request): Promise<Response> {
    if (this.hangAll) await new Promise<void>((go) => this.held.push(go));
    const path = decodeURIComponent(new URL(req.url).pathname).replace(/\/+$/, "") || "/";
    const image = path.includes("/img/");
    switch (req.method) {
      case "PROPFIND":
        return this.propfind(path, req.headers.get("depth") === "1");
      case "MKCOL":
        this.dirs.add(path);
        return new Response(null, { status: 201 });
      case "PUT": {
        const bytes = new Uint8Array(await req.arrayBuffer());
        if (image && this.holdPuts) await new Promise<void>((go) => this.held.push(go));
        this.files.set(path, bytes);
        return new Response(null, { status: 201 });
      }
      case "DELETE":
        this.files.delete(path);
        return new Response(null, { status: 204 });
      case "GET": {
        const bytes = this.files.get(path);
        if (!bytes) return new Response(null, { status: 404 });
        if (!image) return new Response(bytes);
        this.imageGets++;
        return this.misbehave(bytes);
      }
      default:
        return new Response(null, { status: 405 });
    }
  }

  private misbehave(bytes: Uint8Array<ArrayBuffer>): Response {
    // A stream fed part by part: Bun sends it chunked, with no Content-Length.
    const chunked = (parts: Uint8Array[]) =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            const part = parts.shift();
            if (part) controller.enqueue(part);
            else controller.close();
          },
        }),
      );
    switch (this.getMode) {
      case "ok":
        return new Response(bytes);
      case "chunked":
        return chunked([bytes]);
      case "flip": {
        const wrong = bytes.slice();
        for (let i = 100; i < wrong.length; i += 7) wrong[i]! ^= 0x55;
        return new Response(wrong);
      }
      case "append":
        this.sentJunk += bytes.length;
        return chunked([bytes, new Uint8Array(bytes.length)]);
      case "endless":
        return new Response(this.endless("", "Z"));
    }
  }

  private propfind(path: string, depth1: boolean): Response {
    const multistatus = (body: string) =>
      new Response(`<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">${body}</D:multistatus>`, {
        status: 207,
        headers: { "content-type": "application/xml" },
      });
    const opening = `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">`;
    if (this.propfindMode === "endless") return new Response(this.endless(opening, entry("/dav/zzzzzzzzzzzzzzzz", 1)), { status: 207 });
    if (this.propfindMode === "reset") {
      let first = true;
      const broken = new ReadableStream<Uint8Array>({
        async pull(controller) {
          // After the headers and the first bytes are out: a drop mid-body, not a refused request.
          if (!first) return Bun.sleep(50).then(() => controller.error(new Error("peer gone")));
          first = false;
          controller.enqueue(enc.encode(opening));
        },
      });
      return new Response(broken, { status: 207 });
    }
    if (this.dirs.has(path)) {
      let body = entry(`${path}/`);
      if (depth1) {
        const direct = (p: string) => p.startsWith(`${path}/`) && !p.slice(path.length + 1).includes("/");
        for (const d of this.dirs) if (direct(d)) body += entry(`${d}/`);
        for (const [k, v] of this.files) if (direct(k)) body += entry(k, v.byteLength);
      }
      return multistatus(body);
    }
    const file = this.files.get(path);
    return file ? multistatus(entry(path, file.byteLength)) : new Response(null, { status: 404 });
  }
}
