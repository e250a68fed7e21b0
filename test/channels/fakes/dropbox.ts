/**
 * A local stand-in for the Dropbox v2 API (api and content hosts on one
 * origin): upload, upload sessions, download with Range, get_metadata,
 * delete_v2, list_folder(+continue) paged by cursor. Strict like the real one:
 * paths must be "" (root) or start with "/", Dropbox-API-Arg must be
 * ASCII-only JSON, not-found is a 409 with an error_summary, and a
 * missing/expired token is a 401 expired_access_token.
 */
import { randomBytes } from "node:crypto";
import { FakeOAuth, rangedResponse, serveFake, type FakeOAuthOptions } from "./oauth.ts";

const PAGE = 3;

interface StoredFile {
  path: string;
  bytes: Uint8Array;
  modified: string;
}

export class FakeDropbox {
  readonly oauth: FakeOAuth;
  /** By lower-cased path (Dropbox is case-insensitive). */
  readonly files = new Map<string, StoredFile>();
  readonly folders = new Map<string, string>();
  private readonly sessions = new Map<string, Uint8Array[]>();
  /** A listing's entries by id; a cursor is `<id>.<offset>`, new on every page as Dropbox's are. */
  private readonly cursors = new Map<string, object[]>();
  readonly requests: { path: string; arg: string | null }[] = [];
  private readonly server: ReturnType<typeof serveFake>;

  constructor(opts: FakeOAuthOptions = {}) {
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
    const argHeader = req.headers.get("dropbox-api-arg");
    this.requests.push({ path: url.pathname, arg: argHeader });
    const oauth = await this.oauth.handle(req, url);
    if (oauth) return oauth;
    if (!this.oauth.authorized(req)) return dbxError(401, "expired_access_token/");
    if (req.method !== "POST") return new Response("method not allowed", { status: 405 });
    if (argHeader !== null && !/^[\x20-\x7e]*$/.test(argHeader)) return new Response("Dropbox-API-Arg must be HTTP header safe", { status: 400 });
    let arg: Record<string, any>;
    try {
      arg = argHeader !== null ? JSON.parse(argHeader) : await req.clone().json();
    } catch {
      return new Response("bad arguments", { status: 400 });
    }
    const body = async () => new Uint8Array(await req.arrayBuffer());
    switch (url.pathname) {
      case "/2/files/upload":
        return this.commit(arg, await body());
      case "/2/files/upload_session/start": {
        const id = randomBytes(10).toString("hex");
        this.sessions.set(id, [await body()]);
        return Response.json({ session_id: id });
      }
      case "/2/files/upload_session/append_v2":
      case "/2/files/upload_session/finish": {
        const parts = this.sessions.get(arg.cursor?.session_id);
        if (!parts) return dbxError(409, "lookup_failed/not_found/");
        const received = parts.reduce((n, p) => n + p.byteLength, 0);
        if (arg.cursor.offset !== received) return dbxError(409, "lookup_failed/incorrect_offset/");
        parts.push(await body());
        if (url.pathname.endsWith("append_v2")) return Response.json(null);
        this.sessions.delete(arg.cursor.session_id);
        return this.commit(arg.commit, new Uint8Array(Buffer.concat(parts)));
      }
      case "/2/files/download": {
        const file = this.files.get(String(arg.path).toLowerCase());
        if (!file) return dbxError(409, "path/not_found/");
        return rangedResponse(req, file.bytes, { "dropbox-api-result": asciiJson(this.entry(file)) });
      }
      case "/2/files/get_metadata": {
        if (!validPath(arg.path, false)) return dbxError(400, "bad_path");
        const file = this.files.get(arg.path.toLowerCase());
        if (file) return Response.json(this.entry(file));
        const folder = this.folders.get(arg.path.toLowerCase());
        return folder ? Response.json({ ".tag": "folder", name: folder.split("/").pop(), path_display: folder }) : dbxError(409, "path/not_found/");
      }
      case "/2/files/delete_v2":
        return this.remove(arg.path);
      case "/2/files/list_folder":
        return this.list(arg);
      case "/2/files/list_folder/continue": {
        const [id, offset] = String(arg.cursor).split(".");
        const entries = this.cursors.get(id ?? "");
        return entries ? this.page(id!, entries, Number(offset)) : dbxError(409, "reset/");
      }
    }
    return new Response("unknown endpoint", { status: 404 });
  }

  private entry(f: StoredFile) {
    return {
      ".tag": "file",
      name: f.path.split("/").pop(),
      path_display: f.path,
      path_lower: f.path.toLowerCase(),
      size: f.bytes.byteLength,
      server_modified: f.modified,
    };
  }

  private commit(commit: Record<string, any>, bytes: Uint8Array): Response {
    if (!validPath(commit?.path, false) || commit.mode !== "overwrite") return dbxError(400, "bad_commit");
    const path: string = commit.path;
    const parts = path.split("/");
    for (let i = 2; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (!this.folders.has(dir.toLowerCase())) this.folders.set(dir.toLowerCase(), dir);
    }
    const file = { path, bytes, modified: new Date().toISOString().replace(/\.\d+Z$/, "Z") };
    this.files.set(path.toLowerCase(), file);
    return Response.json(this.entry(file));
  }

  private remove(path: string): Response {
    if (!validPath(path, false)) return dbxError(400, "bad_path");
    const lower = path.toLowerCase();
    if (!this.files.has(lower) && !this.folders.has(lower)) return dbxError(409, "path_lookup/not_found/");
    for (const key of [...this.files.keys()]) if (key === lower || key.startsWith(`${lower}/`)) this.files.delete(key);
    for (const key of [...this.folders.keys()]) if (key === lower || key.startsWith(`${lower}/`)) this.folders.delete(key);
    return Response.json({ metadata: { ".tag": "file", path_display: path } });
  }

  private list(arg: Record<string, any>): Response {
    if (!validPath(arg.path, true)) return dbxError(400, "bad_path");
    const lower = String(arg.path).toLowerCase();
    if (lower !== "" && !this.folders.has(lower)) return dbxError(409, "path/not_found/");
    const under = (p: string) => p.startsWith(`${lower}/`) && (arg.recursive || !p.slice(lower.length + 1).includes("/"));
    const entries = [
      ...[...this.folders.entries()]
        .filter(([k]) => under(k))
        .map(([, display]) => ({ ".tag": "folder", name: display.split("/").pop(), path_display: display, path_lower: display.toLowerCase() })),
      ...[...this.files.entries()].filter(([k]) => under(k)).map(([, f]) => this.entry(f)),
    ];
    const id = randomBytes(8).toString("hex");
    this.cursors.set(id, entries);
    return this.page(id, entries, 0, Math.min(PAGE, Number(arg.limit) || PAGE));
  }

  private page(id: string, all: object[], offset: number, size = PAGE): Response {
    const entries = all.slice(offset, offset + size);
    const next = offset + entries.length;
    return Response.json({ entries, cursor: `${id}.${next}`, has_more: next < all.length });
  }
}

/** "" only where the root is allowed (list_folder); otherwise "/…" without a trailing or doubled slash. */
function validPath(path: unknown, rootAllowed: boolean): path is string {
  if (typeof path !== "string") return false;
  if (path === "") return rootAllowed;
  return path.startsWith("/") && !path.endsWith("/") && !path.includes("//");
}

function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function dbxError(status: number, summary: string): Response {
  if (status === 400) return new Response(`Error in call: ${summary}`, { status });
  return Response.json({ error_summary: summary, error: { ".tag": summary.split("/")[0] } }, { status });
}
