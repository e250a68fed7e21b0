import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import type { OAuthApiClient } from "../oauth/api-client";
import { chunksOf, toBytes } from "../oauth/body";
import { byKey, dirOfPrefix, mayHoldPrefix, oauthClient, roundTripProbe, type OAuthDriverOptions } from "../oauth/driver-kit";
import { ApiRequestError, OAuthError } from "../oauth/errors";
import { decodeName, DROPBOX_NAMES, encodePath } from "../oauth/names";
import { checkWalkDepth, folderPageGuard } from "../oauth/paging";
import { rangedResult, refuseMissingOrBadRange } from "../oauth/ranged";
import { dropboxErrorCode, dropboxPage, headerJson, resolveDropboxSettings, type DropboxEntry, type DropboxPage, type DropboxSettings } from "./dropbox/config";
import { assertSafeKey, assertSafePrefix } from "./object-key";

export { dropboxDriverOptions } from "./dropbox/config";

export function createDropboxDriver(config: Record<string, string>, opts: OAuthDriverOptions = {}): DropboxDriver {
  return new DropboxDriver(resolveDropboxSettings(config, opts.apiBase), oauthClient("dropbox", config, opts, dropboxErrorCode));
}

/** "path/not_found", "path_lookup/not_found", "from_lookup/not_found", … */
const isNotFound = (err: unknown) => err instanceof ApiRequestError && err.status === 409 && /(^|\/)not_found$/.test(err.code);

/**
 * Dropbox (API v2). Paths are strings ("/a/b.txt", the root is ""); parent
 * folders are created by uploads. Files up to chunk_size go in one
 * /files/upload, larger ones through an upload session.
 */
export class DropboxDriver implements Driver {
  readonly kind = "dropbox";

  constructor(
    private readonly settings: DropboxSettings,
    private readonly api: OAuthApiClient,
  ) {}

  /** Dropbox path of a relative path ("" → the root, spelled ""). */
  private pathOf(rel: string): string {
    return rel === "" ? "" : `/${encodePath(rel, DROPBOX_NAMES)}`;
  }

  private keyPath(key: string): string {
    assertSafeKey(key);
    return this.pathOf(this.settings.root ? `${this.settings.root}/${key}` : key);
  }

  private rpc<T>(endpoint: string, arg: unknown, target: string): Promise<T> {
    return this.api.json<T>({ method: "POST", url: `${this.settings.apiUrl}/${endpoint}`, target, body: arg });
  }

  private async content(endpoint: string, arg: unknown, target: string, body: Uint8Array): Promise<unknown> {
    const url = `${this.settings.contentUrl}/${endpoint}`;
    const response = await this.api.send({
      method: "POST",
      url,
      target,
      headers: { "dropbox-api-arg": headerJson(arg), "content-type": "application/octet-stream" },
      body,
    });
    return this.api.readJson<unknown>(response);
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const path = this.keyPath(key);
    const commit = { path, mode: "overwrite", autorename: false, mute: true };
    if (size <= this.settings.chunkSize) {
      await this.content("files/upload", commit, key, await toBytes(body, size));
      return;
    }
    // More than one chunk by construction: start with the first, append the middle ones, finish with the last.
    let sessionId = "";
    let offset = 0;
    for await (const chunk of chunksOf(body, size, this.settings.chunkSize)) {
      const last = offset + chunk.byteLength === size;
      if (sessionId === "") {
        const started = (await this.content("files/upload_session/start", { close: false }, key, chunk)) as { session_id?: string };
        if (typeof started.session_id !== "string") throw new OAuthError("Dropbox 未返回上传会话 id");
        sessionId = started.session_id;
      } else if (!last) {
        await this.content("files/upload_session/append_v2", { cursor: { session_id: sessionId, offset }, close: false }, key, chunk);
      } else {
        await this.content("files/upload_session/finish", { cursor: { session_id: sessionId, offset }, commit }, key, chunk);
      }
      offset += chunk.byteLength;
    }
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const headers: Record<string, string> = { "dropbox-api-arg": headerJson({ path: this.keyPath(key) }) };
    if (range) headers.range = `bytes=${range.start}-${range.end ?? ""}`;
    let response: Response;
    try {
      response = await this.api.send({ method: "POST", url: `${this.settings.contentUrl}/files/download`, target: key, headers, accept: [416] });
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
    await refuseMissingOrBadRange(response, key, range);
    let total: number | undefined;
    try {
      total = (JSON.parse(response.headers.get("dropbox-api-result") ?? "") as DropboxEntry).size;
    } catch {
      total = undefined;
    }
    return rangedResult(response, range, "Dropbox", total);
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const entry = await this.metadata(this.keyPath(key), key);
    if (entry?.[".tag"] !== "file" || typeof entry.size !== "number") return null;
    return { key, size: entry.size, modified: entry.server_modified ? new Date(entry.server_modified) : undefined };
  }

  private async metadata(path: string, target: string): Promise<DropboxEntry | null> {
    try {
      return await this.rpc<DropboxEntry>("files/get_metadata", { path }, target);
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.rpc("files/delete_v2", { path: this.keyPath(key) }, key);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    yield* this.walk(dirOfPrefix(prefix), prefix);
  }

  /**
   * One folder at a time (not recursive=true): a recursive listing's
   * path_display only guarantees the casing of the last component, while
   * `name` is always exact, so keys are built from names. Page by page: each
   * page's files are yielded and its folders walked before the next page is
   * asked for, so memory holds one page per level, never a whole folder.
   */
  private async *walk(dirKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    checkWalkDepth("Dropbox", dirKey);
    const root = this.settings.root;
    const path = this.pathOf(root && dirKey ? `${root}/${dirKey}` : root || dirKey);
    const target = dirKey ? `${dirKey}/` : "/";
    const guard = folderPageGuard("Dropbox");
    let page: DropboxPage;
    try {
      page = dropboxPage(await this.rpc("files/list_folder", { path, recursive: false, limit: 2000 }, target));
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    for (;;) {
      const found: ObjectInfo[] = [];
      const folders: string[] = [];
      for (const entry of page.entries) {
        const name = decodeName(entry.name, DROPBOX_NAMES);
        const key = dirKey ? `${dirKey}/${name}` : name;
        if (entry[".tag"] === "folder") folders.push(key);
        else if (entry[".tag"] === "file" && typeof entry.size === "number" && key.startsWith(prefix)) {
          found.push({ key, size: entry.size, modified: entry.server_modified ? new Date(entry.server_modified) : undefined });
        }
      }
      yield* found.sort(byKey);
      for (const folder of folders.sort()) if (mayHoldPrefix(folder, prefix)) yield* this.walk(folder, prefix);
      if (!page.has_more) return;
      const cursor = guard.follow(page.cursor, page.entries.length);
      page = dropboxPage(await this.rpc("files/list_folder/continue", { cursor }, target));
    }
  }

  async probe(deep: boolean): Promise<void> {
    if (this.settings.root) {
      // Named by its option: the path itself is configuration (spec 6.3).
      const entry = await this.metadata(this.pathOf(this.settings.root), "path 指定的文件夹");
      if (entry && entry[".tag"] !== "folder") throw new OAuthError("Dropbox path 指定的路径不是文件夹");
    } else {
      // Any authorized call proves the token; listing one entry of the root is the cheapest.
      await this.rpc("files/list_folder", { path: "", recursive: false, limit: 1 }, "/");
    }
    if (deep) await roundTripProbe(this, "Dropbox");
  }
}
