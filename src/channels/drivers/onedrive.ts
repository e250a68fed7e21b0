import type { ByteRange, Driver, GetResult, ObjectInfo } from "../driver";
import type { OAuthApiClient } from "../oauth/api-client";
import { chunksOf, toBytes } from "../oauth/body";
import { byKey, dirOfPrefix, mayHoldPrefix, oauthClient, roundTripProbe, type OAuthDriverOptions } from "../oauth/driver-kit";
import { OAuthError } from "../oauth/errors";
import { decodeName, encodePath, ONEDRIVE_NAMES } from "../oauth/names";
import { rangedResult, refuseMissingOrBadRange } from "../oauth/ranged";
import { assertSafeKey, assertSafePrefix } from "./object-key";
import {
  graphErrorCode,
  graphPage,
  resolveOnedriveSettings,
  SIMPLE_UPLOAD_LIMIT,
  type GraphDrive,
  type GraphItem,
  type OnedriveSettings,
} from "./onedrive/config";
import { checkWalkDepth, folderPageGuard } from "../oauth/paging";

export { onedriveDriverOptions } from "./onedrive/config";

export function createOnedriveDriver(config: Record<string, string>, opts: OAuthDriverOptions = {}): OnedriveDriver {
  return new OnedriveDriver(resolveOnedriveSettings(config, opts.apiBase), oauthClient("onedrive", config, opts, graphErrorCode));
}

/**
 * OneDrive through Microsoft Graph, addressing items by path under the drive
 * root (`/drives/{id}/root:/{path}:`). Graph creates missing parent folders on
 * upload, so there is no folder bookkeeping. Small files go in one PUT, larger
 * ones through an upload session in chunk_size pieces (multiples of 320 KiB).
 * Downloads answer 302 to a pre-authenticated URL, fetched without the token.
 */
export class OnedriveDriver implements Driver {
  readonly kind = "onedrive";
  private driveId: string;

  constructor(
    private readonly settings: OnedriveSettings,
    private readonly api: OAuthApiClient,
  ) {
    this.driveId = settings.driveId;
  }

  /** The signed-in user's default drive (GET /me/drive): how drive_id / drive_type are completed. */
  async defaultDrive(): Promise<{ id: string; driveType: string }> {
    const drive = await this.api.json<GraphDrive>({ method: "GET", url: `${this.settings.apiRoot}/me/drive`, target: "/me/drive" });
    if (typeof drive?.id !== "string" || drive.id === "") throw new OAuthError("OneDrive 未返回默认驱动器 id");
    return { id: drive.id, driveType: typeof drive.driveType === "string" ? drive.driveType : "" };
  }

  private async drivePath(): Promise<string> {
    // Without drive_id (test before create fills it), the default drive is used, as rclone's config would pick.
    if (this.driveId === "") this.driveId = (await this.defaultDrive()).id;
    return `${this.settings.apiRoot}/drives/${encodeURIComponent(this.driveId)}`;
  }

  /** Path of a key relative to the drive root (the configured `path` applied). */
  private relOf(key: string): string {
    assertSafeKey(key);
    return this.settings.root ? `${this.settings.root}/${key}` : key;
  }

  /** `/drives/{id}/root:/{encoded path}:` ("" = the root item itself). */
  private async itemUrl(rel: string): Promise<string> {
    const drive = await this.drivePath();
    if (rel === "") return `${drive}/root`;
    const encoded = encodePath(rel, ONEDRIVE_NAMES).split("/").map(encodeURIComponent).join("/");
    return `${drive}/root:/${encoded}:`;
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const item = await this.itemUrl(this.relOf(key));
    if (size <= SIMPLE_UPLOAD_LIMIT) {
      const bytes = await toBytes(body, size);
      const response = await this.api.send({
        method: "PUT",
        url: `${item}/content`,
        target: key,
        headers: { "content-type": "application/octet-stream" },
        body: bytes,
      });
      await response.body?.cancel().catch(() => {});
      return;
    }
    await this.uploadSession(item, key, body, size);
  }

  /** Large files: createUploadSession, then chunks to the pre-authenticated uploadUrl (no token sent there). */
  private async uploadSession(item: string, key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number) {
    const session = await this.api.json<{ uploadUrl?: string }>({
      method: "POST",
      url: `${item}/createUploadSession`,
      target: key,
      body: { item: { "@microsoft.graph.conflictBehavior": "replace" } },
    });
    const uploadUrl = session.uploadUrl;
    if (typeof uploadUrl !== "string" || !/^https?:\/\//.test(uploadUrl)) throw new OAuthError("OneDrive 未返回有效的上传会话地址");
    let offset = 0;
    try {
      for await (const chunk of chunksOf(body, size, this.settings.chunkSize)) {
        const end = offset + chunk.byteLength - 1;
        const last = end === size - 1;
        const response = await this.api.send({
          method: "PUT",
          url: uploadUrl,
          target: key,
          auth: false,
          headers: { "content-range": `bytes ${offset}-${end}/${size}`, "content-type": "application/octet-stream" },
          body: chunk,
          timeoutMs: 60_000 + Math.ceil(chunk.byteLength / 65536) * 1000,
        });
        await response.body?.cancel().catch(() => {});
        if (!last && response.status !== 202) throw new OAuthError(`OneDrive 上传会话返回了意外的状态 ${response.status}: ${key}`);
        offset = end + 1;
      }
    } catch (err) {
      // An abandoned session would hold the partial upload until it expires.
      await this.api.send({ method: "DELETE", url: uploadUrl, target: key, auth: false, accept: [404] }).catch(() => {});
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const item = await this.itemUrl(this.relOf(key));
    const first = await this.api.send({ method: "GET", url: `${item}/content`, target: key, accept: [302, 404] });
    let response = first;
    if (first.status === 302) {
      await first.body?.cancel().catch(() => {});
      const location = first.headers.get("location");
      if (!location) throw new OAuthError(`OneDrive 下载重定向缺少地址: ${key}`);
      const headers: Record<string, string> = range ? { range: `bytes=${range.start}-${range.end ?? ""}` } : {};
      response = await this.api.send({ method: "GET", url: new URL(location, item).href, target: key, auth: false, headers, accept: [404, 416] });
    }
    await refuseMissingOrBadRange(response, key, range);
    return rangedResult(response, range, "OneDrive");
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const item = await this.metadata(this.relOf(key), key);
    if (!item || item.folder || typeof item.size !== "number") return null;
    return { key, size: item.size, modified: item.lastModifiedDateTime ? new Date(item.lastModifiedDateTime) : undefined };
  }

  private async metadata(rel: string, target: string): Promise<GraphItem | null> {
    const url = await this.itemUrl(rel);
    const response = await this.api.send({ method: "GET", url, target, headers: { accept: "application/json" }, accept: [404] });
    if (response.status === 404) {
      await response.body?.cancel().catch(() => {});
      return null;
    }
    return this.api.readJson<GraphItem>(response);
  }

  async delete(key: string): Promise<void> {
    const response = await this.api.send({ method: "DELETE", url: await this.itemUrl(this.relOf(key)), target: key, accept: [404] });
    await response.body?.cancel().catch(() => {});
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    yield* this.walk(dirOfPrefix(prefix), prefix);
  }

  /**
   * Children of one folder (following @odata.nextLink), recursing into sub-folders that can hold
   * the prefix, page by page: a provider that pages without end, repeats a link or nests folders
   * without end fails the listing (oauth/paging.ts) instead of growing a whole folder in memory.
   */
  private async *walk(dirKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    checkWalkDepth("OneDrive", dirKey);
    const guard = folderPageGuard("OneDrive");
    const root = this.settings.root;
    const rel = root && dirKey ? `${root}/${dirKey}` : root || dirKey;
    const base = await this.itemUrl(rel);
    let url: string | undefined = `${base}/children?$top=1000&$select=name,size,file,folder,lastModifiedDateTime`;
    while (url) {
      const response = await this.api.send({ method: "GET", url, target: dirKey ? `${dirKey}/` : "/", headers: { accept: "application/json" }, accept: [404] });
      if (response.status === 404) {
        await response.body?.cancel().catch(() => {});
        return;
      }
      const page = graphPage(await this.api.readJson<unknown>(response));
      const found: ObjectInfo[] = [];
      const folders: string[] = [];
      for (const item of page.value) {
        const key = dirKey ? `${dirKey}/${decodeName(item.name, ONEDRIVE_NAMES)}` : decodeName(item.name, ONEDRIVE_NAMES);
        if (item.folder) folders.push(key);
        else if (typeof item.size === "number" && key.startsWith(prefix)) {
          found.push({ key, size: item.size, modified: item.lastModifiedDateTime ? new Date(item.lastModifiedDateTime) : undefined });
        }
      }
      yield* found.sort(byKey);
      for (const folder of folders.sort()) if (mayHoldPrefix(folder, prefix)) yield* this.walk(folder, prefix);
      url = page.nextLink === undefined ? undefined : this.nextLink(guard.follow(page.nextLink, page.value.length));
    }
  }

  /** Paging links must stay on the API origin: the token is sent with them. */
  private nextLink(link: string): string {
    if (new URL(link).origin !== new URL(this.settings.apiRoot).origin) throw new OAuthError("OneDrive 分页链接指向了其他主机，已拒绝");
    return link;
  }

  async probe(deep: boolean): Promise<void> {
    // Reading the drive root proves the token and drive_id; the configured path is created by the first upload.
    if (!(await this.metadata("", "/"))) throw new OAuthError("OneDrive 驱动器不存在，请检查 drive_id");
    if (this.settings.root) {
      // Named by its option: the path itself is configuration (spec 6.3).
      const item = await this.metadata(this.settings.root, "path 指定的文件夹");
      if (item && !item.folder) throw new OAuthError("OneDrive path 指定的路径不是文件夹");
    }
    if (deep) await roundTripProbe(this, "OneDrive");
  }
}
