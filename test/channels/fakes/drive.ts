/**
 * A local stand-in for the Google Drive v3 API: files addressed by id,
 * files.list with the two query shapes the driver uses (anything else is an
 * invalid query, as an unsupported one would be), multipart and resumable
 * uploads (chunks in multiples of 256 KiB, 308 until the last), alt=media
 * downloads with Range, trash, and 401 for a missing/expired token.
 */
import { randomBytes } from "node:crypto";
import { FakeOAuth, rangedResponse, serveFake, type FakeOAuthOptions } from "./oauth.ts";

export const FOLDER = "application/vnd.google-apps.folder";
const PAGE = 3;
const CHUNK_MULTIPLE = 256 * 1024;

export interface FakeFile {
  id: string;
  name: string;
  mimeType: string;
  parents: string[];
  bytes?: Uint8Array;
  trashed: boolean;
  modifiedTime: string;
}

interface Resumable {
  fileId?: string;
  metadata: { name?: string; parents?: string[] };
  parts: Uint8Array[];
  received: number;
}

export class FakeDrive {
  readonly oauth: FakeOAuth;
  readonly rootId = `root-${randomBytes(6).toString("hex")}`;
  readonly files = new Map<string, FakeFile>();
  private readonly sessions = new Map<string, Resumable>();
  readonly requests: { method: string; path: string; search: string }[] = [];
  private readonly server: ReturnType<typeof serveFake>;

  constructor(opts: FakeOAuthOptions = {}) {
    this.oauth = new FakeOAuth(opts);
    this.files.set(this.rootId, { id: this.rootId, name: "My Drive", mimeType: FOLDER, parents: [], trashed: false, modifiedTime: new Date().toISOString() });
    this.server = serveFake((req, url) => this.handle(req, url));
  }

  get origin(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  stop() {
    this.server.stop(true);
  }

  /** Path of a live file ("a/b/c.txt"), for assertions. */
  pathOf(file: FakeFile): string {
    const names: string[] = [];
    for (let f: FakeFile | undefined = file; f && f.id !== this.rootId; f = this.files.get(f.parents[0] ?? "")) names.unshift(f.name);
    return names.join("/");
  }

  private async handle(req: Request, url: URL): Promise<Response> {
    this.requests.push({ method: req.method, path: url.pathname, search: url.search });
    const oauth = await this.oauth.handle(req, url);
    if (oauth) return oauth;
    if (!this.oauth.authorized(req)) return googleError(401, "authError");
    const p = url.pathname;
    const q = url.searchParams;
    if (p === "/drive/v3/files" && req.method === "GET") return this.list(q);
    if (p === "/drive/v3/files" && req.method === "POST") return this.createMetadata(await req.json());
    if (p === "/upload/drive/v3/files" && req.method === "PUT" && q.get("upload_id")) return this.resumableChunk(req, q.get("upload_id")!);
    const upload = /^\/upload\/drive\/v3\/files(?:\/([^/]+))?$/.exec(p);
    if (upload && (req.method === "POST" || req.method === "PATCH")) return this.upload(req, q, upload[1] ? decodeURIComponent(upload[1]) : undefined);
    const one = /^\/drive\/v3\/files\/([^/]+)$/.exec(p);
    if (!one) return googleError(404, "notFound");
    const id = decodeURIComponent(one[1]!) === "root" ? this.rootId : decodeURIComponent(one[1]!);
    const file = this.files.get(id);
    if (!file) return googleError(404, "notFound");
    if (req.method === "GET") {
      if (q.get("alt") === "media") return file.bytes ? rangedResponse(req, file.bytes) : googleError(403, "fileNotDownloadable");
      return Response.json(this.json(file));
    }
    if (req.method === "PATCH") {
      const patch = (await req.json()) as { trashed?: boolean };
      if (typeof patch.trashed === "boolean") file.trashed = patch.trashed;
      return Response.json({ id: file.id });
    }
    if (req.method === "DELETE") {
      this.files.delete(id);
      return new Response(null, { status: 204 });
    }
    return googleError(400, "badRequest");
  }

  private json(f: FakeFile) {
    return { id: f.id, name: f.name, mimeType: f.mimeType, modifiedTime: f.modifiedTime, ...(f.bytes ? { size: String(f.bytes.byteLength) } : {}) };
  }

  /** `[name = '…' and ]'<parent>' in parents and trashed = false` with \' and \\ escapes; nothing else. */
  private list(q: URLSearchParams): Response {
    const lit = String.raw`'((?:[^'\\]|\\.)*)'`;
    const m = new RegExp(`^(?:name = ${lit} and )?${lit} in parents and trashed = false$`).exec(q.get("q") ?? "");
    if (!m) return googleError(400, "invalidQuery");
    const unescapeQuery = (s: string) => s.replace(/\\(.)/g, "$1");
    const name = m[1] === undefined ? undefined : unescapeQuery(m[1]);
    const parent = unescapeQuery(m[2]!) === "root" ? this.rootId : unescapeQuery(m[2]!);
    const all = [...this.files.values()]
      .filter((f) => !f.trashed && f.parents.includes(parent) && (name === undefined || f.name === name))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    const skip = Number(q.get("pageToken") ?? "0");
    const body: Record<string, unknown> = { files: all.slice(skip, skip + PAGE).map((f) => this.json(f)) };
    if (skip + PAGE < all.length) body.nextPageToken = String(skip + PAGE);
    return Response.json(body);
  }

  private createMetadata(meta: { name?: string; mimeType?: string; parents?: string[] }): Response {
    const parent = meta.parents?.[0];
    if (!meta.name || !parent || !this.files.get(parent === "root" ? this.rootId : parent)) return googleError(404, "notFound");
    const file = this.add({ name: meta.name, mimeType: meta.mimeType ?? "application/octet-stream", parents: [parent === "root" ? this.rootId : parent] });
    return Response.json(this.json(file));
  }

  private add(f: Omit<FakeFile, "id" | "trashed" | "modifiedTime">): FakeFile {
    const file: FakeFile = { ...f, id: randomBytes(10).toString("hex"), trashed: false, modifiedTime: new Date().toISOString() };
    this.files.set(file.id, file);
    return file;
  }

  private async upload(req: Request, q: URLSearchParams, fileId?: string): Promise<Response> {
    if (fileId && !this.files.get(fileId)) return googleError(404, "notFound");
    const type = q.get("uploadType");
    if (type === "resumable") {
      const metadata = (await req.json()) as Resumable["metadata"];
      if (fileId && metadata.parents) return googleError(400, "parentsNotAllowed");
      const id = randomBytes(10).toString("hex");
      this.sessions.set(id, { fileId, metadata, parts: [], received: 0 });
      return new Response(null, { status: 200, headers: { location: `${this.origin}/upload/drive/v3/files?uploadType=resumable&upload_id=${id}` } });
    }
    if (type !== "multipart") return googleError(400, "badRequest");
    const boundary = /boundary=([^;]+)/.exec(req.headers.get("content-type") ?? "")?.[1];
    if (!boundary) return googleError(400, "badContent");
    const raw = Buffer.from(await req.arrayBuffer());
    const parts = splitMultipart(raw, boundary);
    if (parts.length !== 2) return googleError(400, "badContent");
    const metadata = JSON.parse(parts[0]!.toString("utf8")) as Resumable["metadata"];
    return this.commit({ fileId, metadata, parts: [parts[1]!], received: parts[1]!.byteLength });
  }

  private commit(s: Resumable): Response {
    const bytes = new Uint8Array(Buffer.concat(s.parts));
    if (s.fileId) {
      const file = this.files.get(s.fileId)!;
      file.bytes = bytes;
      file.modifiedTime = new Date().toISOString();
      return Response.json(this.json(file));
    }
    const parent = s.metadata.parents?.[0];
    if (!s.metadata.name || !parent || !this.files.get(parent)) return googleError(404, "notFound");
    return Response.json(this.json(this.add({ name: s.metadata.name, mimeType: "application/octet-stream", parents: [parent], bytes })));
  }

  private async resumableChunk(req: Request, id: string): Promise<Response> {
    const session = this.sessions.get(id);
    if (!session) return googleError(404, "notFound");
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(req.headers.get("content-range") ?? "");
    const bytes = new Uint8Array(await req.arrayBuffer());
    if (!m || Number(m[1]) !== session.received || Number(m[2]) - Number(m[1]) + 1 !== bytes.byteLength) return googleError(400, "badContentRange");
    const last = Number(m[2]) === Number(m[3]) - 1;
    if (!last && bytes.byteLength % CHUNK_MULTIPLE !== 0) return googleError(400, "badChunkSize");
    session.parts.push(bytes);
    session.received += bytes.byteLength;
    if (!last) return new Response(null, { status: 308, headers: { range: `bytes=0-${session.received - 1}` } });
    this.sessions.delete(id);
    return this.commit(session);
  }
}

/** The bodies of a multipart/related request (headers stripped). */
function splitMultipart(raw: Buffer, boundary: string): Buffer[] {
  const out: Buffer[] = [];
  const delimiter = Buffer.from(`--${boundary}`);
  let pos = raw.indexOf(delimiter);
  while (pos >= 0) {
    const next = raw.indexOf(delimiter, pos + delimiter.length);
    if (next < 0) break;
    const part = raw.subarray(pos + delimiter.length + 2, next - 2);
    const headerEnd = part.indexOf("\r\n\r\n");
    out.push(part.subarray(headerEnd + 4));
    pos = next;
  }
  return out;
}

function googleError(status: number, reason: string): Response {
  return Response.json({ error: { code: status, message: "fake drive error", errors: [{ reason, message: "fake" }] } }, { status });
}
