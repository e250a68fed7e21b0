/**
 * A local stand-in for Microsoft Graph's OneDrive API: exactly the calls the
 * onedrive driver makes, behaving like the real service where it matters —
 * 401 for a missing/expired token, names with Windows-forbidden characters
 * refused, 4 MiB cap on simple uploads, upload-session chunks in multiples of
 * 320 KiB sent *without* Authorization, downloads via a 302 to a
 * pre-authenticated URL, children listings paged through @odata.nextLink.
 */
import { randomBytes } from "node:crypto";
import { FakeOAuth, rangedResponse, serveFake, type FakeOAuthOptions } from "./oauth.ts";

interface StoredFile {
  id: string;
  bytes: Uint8Array;
  modified: string;
}

interface Session {
  path: string;
  received: number;
  parts: Uint8Array[];
  total: number;
}

const FORBIDDEN = /["*:<>?\\|]|^[ ~]|[ .]$/;
const PAGE = 3;
const CHUNK_MULTIPLE = 320 * 1024;

export class FakeOnedrive {
  readonly oauth: FakeOAuth;
  readonly driveId = `drive-${randomBytes(6).toString("hex")}`;
  readonly files = new Map<string, StoredFile>();
  readonly folders = new Set<string>();
  private readonly sessions = new Map<string, Session>();
  /** Requests seen: method, path and whether an Authorization header came along. */
  readonly requests: { method: string; path: string; auth: boolean }[] = [];
  private readonly server: ReturnType<typeof serveFake>;
  /** Simulates a provider outage for /me/drive (rule 2: provider query fails → 400). */
  failMeDrive = false;

  constructor(opts: FakeOAuthOptions = { rotateRefreshTokens: true }) {
    this.oauth = new FakeOAuth(opts);
    this.server = serveFake((req, url) => this.handle(req, url));
  }

  get origin(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  stop() {
    this.server.stop(true);
  }

  private async handle(req: Request, url: URL): Promise<Response> {
    this.requests.push({ method: req.method, path: url.pathname, auth: req.headers.has("authorization") });
    const oauth = await this.oauth.handle(req, url);
    if (oauth) return oauth;
    if (url.pathname.startsWith("/dl/")) return this.download(req, url);
    if (url.pathname.startsWith("/upload-session/")) return this.chunk(req, url);
    if (!url.pathname.startsWith("/v1.0/")) return graphError(404, "itemNotFound");
    if (!this.oauth.authorized(req)) {
      return graphError(401, "InvalidAuthenticationToken", { "www-authenticate": 'Bearer error="invalid_token", error_description="expired_token"' });
    }
    if (url.pathname === "/v1.0/me/drive" && req.method === "GET") {
      return this.failMeDrive ? graphError(503, "serviceNotAvailable") : Response.json({ id: this.driveId, driveType: "personal", name: "OneDrive" });
    }
    const m = /^\/v1\.0\/drives\/([^/]+)\/root(?::\/([^:]*):?)?(\/children|\/content|\/createUploadSession)?$/.exec(url.pathname);
    if (!m || decodeURIComponent(m[1]!) !== this.driveId) return graphError(404, "itemNotFound");
    let path: string;
    try {
      path = m[2] === undefined ? "" : m[2].split("/").map(decodeURIComponent).join("/");
    } catch {
      return graphError(400, "invalidRequest");
    }
    if (path.split("/").some((s) => FORBIDDEN.test(s))) return graphError(400, "invalidRequest");
    const action = m[3] ?? "";
    if (action === "/children" && req.method === "GET") return this.children(path, url);
    if (action === "/content" && req.method === "PUT") return this.simpleUpload(path, req);
    if (action === "/content" && req.method === "GET") {
      const file = this.files.get(path);
      return file
        ? new Response(null, { status: 302, headers: { location: `${this.origin}/dl/${file.id}?sig=${randomBytes(8).toString("hex")}` } })
        : graphError(404, "itemNotFound");
    }
    if (action === "/createUploadSession" && req.method === "POST") {
      const id = randomBytes(12).toString("hex");
      this.sessions.set(id, { path, received: 0, parts: [], total: -1 });
      return Response.json({ uploadUrl: `${this.origin}/upload-session/${id}`, expirationDateTime: new Date(Date.now() + 3600_000).toISOString() });
    }
    if (action === "" && req.method === "GET") return this.item(path);
    if (action === "" && req.method === "DELETE") return this.remove(path);
    return graphError(400, "invalidRequest");
  }

  private itemJson(path: string) {
    const name = path === "" ? "root" : path.slice(path.lastIndexOf("/") + 1);
    const file = this.files.get(path);
    if (file) return { id: file.id, name, size: file.bytes.byteLength, file: { mimeType: "application/octet-stream" }, lastModifiedDateTime: file.modified };
    if (path === "" || this.folders.has(path)) return { id: `folder-${path}`, name, size: 0, folder: { childCount: 0 } };
    return null;
  }

  private item(path: string): Response {
    const item = this.itemJson(path);
    return item ? Response.json(item) : graphError(404, "itemNotFound");
  }

  private store(path: string, bytes: Uint8Array) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) this.folders.add(parts.slice(0, i).join("/"));
    this.files.set(path, { id: this.files.get(path)?.id ?? randomBytes(8).toString("hex"), bytes, modified: new Date().toISOString() });
    return Response.json(this.itemJson(path), { status: 201 });
  }

  private async simpleUpload(path: string, req: Request): Promise<Response> {
    const bytes = new Uint8Array(await req.arrayBuffer());
    if (bytes.byteLength > 4 * 1024 * 1024) return graphError(413, "requestTooLarge");
    return this.store(path, bytes);
  }

  private async chunk(req: Request, url: URL): Promise<Response> {
    const id = url.pathname.slice("/upload-session/".length);
    const session = this.sessions.get(id);
    if (!session) return graphError(404, "itemNotFound");
    if (req.method === "DELETE") {
      this.sessions.delete(id);
      return new Response(null, { status: 204 });
    }
    // Graph refuses the token on the pre-authenticated upload URL.
    if (req.headers.has("authorization")) return graphError(401, "unauthenticated");
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(req.headers.get("content-range") ?? "");
    const bytes = new Uint8Array(await req.arrayBuffer());
    if (!m || Number(m[1]) !== session.received || Number(m[2]) - Number(m[1]) + 1 !== bytes.byteLength) return graphError(416, "invalidRange");
    const total = Number(m[3]);
    const last = Number(m[2]) === total - 1;
    if (!last && bytes.byteLength % CHUNK_MULTIPLE !== 0) return graphError(400, "invalidChunkSize");
    session.parts.push(bytes);
    session.received += bytes.byteLength;
    if (!last) return Response.json({ nextExpectedRanges: [`${session.received}-`] }, { status: 202 });
    this.sessions.delete(id);
    return this.store(session.path, new Uint8Array(Buffer.concat(session.parts)));
  }

  private download(req: Request, url: URL): Response {
    const id = url.pathname.slice("/dl/".length);
    const file = [...this.files.values()].find((f) => f.id === id);
    if (!file) return new Response("gone", { status: 404 });
    return rangedResponse(req, file.bytes);
  }

  private remove(path: string): Response {
    if (!this.itemJson(path) || path === "") return graphError(404, "itemNotFound");
    for (const key of [...this.files.keys()]) if (key === path || key.startsWith(`${path}/`)) this.files.delete(key);
    for (const dir of [...this.folders]) if (dir === path || dir.startsWith(`${path}/`)) this.folders.delete(dir);
    return new Response(null, { status: 204 });
  }

  private children(path: string, url: URL): Response {
    if (path !== "" && !this.folders.has(path)) return graphError(404, "itemNotFound");
    const prefix = path === "" ? "" : `${path}/`;
    const names = new Set<string>();
    for (const key of [...this.files.keys(), ...this.folders]) {
      if (key.startsWith(prefix) && key.length > prefix.length) names.add(key.slice(prefix.length).split("/")[0]!);
    }
    const all = [...names].sort().map((n) => this.itemJson(prefix + n)!);
    const skip = Number(url.searchParams.get("$skiptoken") ?? "0");
    const page = all.slice(skip, skip + PAGE);
    const body: Record<string, unknown> = { value: page };
    if (skip + PAGE < all.length) {
      const next = new URL(url.href);
      next.searchParams.set("$skiptoken", String(skip + PAGE));
      body["@odata.nextLink"] = next.href;
    }
    return Response.json(body);
  }
}

function graphError(status: number, code: string, headers: Record<string, string> = {}): Response {
  return Response.json({ error: { code, message: "fake graph error" } }, { status, headers });
}
