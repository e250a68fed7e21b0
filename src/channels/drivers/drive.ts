import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import type { OAuthApiClient } from "../oauth/api-client";
import { baseName, byKey, dirOfPrefix, mayHoldPrefix, oauthClient, parentOf, roundTripProbe, type OAuthDriverOptions } from "../oauth/driver-kit";
import { ApiRequestError, OAuthError } from "../oauth/errors";
import { checkWalkDepth, folderPageGuard } from "../oauth/paging";
import { rangedResult, refuseMissingOrBadRange } from "../oauth/ranged";
import { FILE_FIELDS, FOLDER_MIME, googleErrorCode, queryString, resolveDriveSettings, type DriveFile, type DriveSettings } from "./drive/config";
import { DriveFolders } from "./drive/folders";
import { uploadFile } from "./drive/upload";
import { assertSafeKey, assertSafePrefix } from "./object-key";

export { driveDriverOptions } from "./drive/config";

export function createDriveDriver(config: Record<string, string>, opts: OAuthDriverOptions = {}): DriveDriver {
  return new DriveDriver(resolveDriveSettings(config, opts.apiBase), oauthClient("drive", config, opts, googleErrorCode));
}

/**
 * Google Drive (API v3). Paths are resolved to ids folder by folder (cached);
 * names need no encoding, Drive accepts any. Deleting moves to the trash
 * unless use_trash is false, as rclone does.
 */
export class DriveDriver implements Driver {
  readonly kind = "drive";
  private readonly folders: DriveFolders;

  constructor(
    private readonly settings: DriveSettings,
    private readonly api: OAuthApiClient,
  ) {
    this.folders = new DriveFolders(api, settings);
  }

  /** The id of My Drive's root folder: how root_folder_id is completed at creation (rclone caches it the same way). */
  async rootFolderId(): Promise<string> {
    const root = await this.api.json<DriveFile>({ method: "GET", url: `${this.settings.filesUrl}/root?fields=id`, target: "root" });
    if (typeof root?.id !== "string" || root.id === "") throw new OAuthError("Google Drive 未返回根文件夹 id");
    return root.id;
  }

  private relOf(key: string): string {
    assertSafeKey(key);
    return this.settings.root ? `${this.settings.root}/${key}` : key;
  }

  /** The (first) non-folder file at a path, or null. */
  private async findFile(rel: string, target: string): Promise<DriveFile | null> {
    const parentId = await this.folders.find(parentOf(rel));
    if (!parentId) return null;
    return (await this.folders.lookup(parentId, baseName(rel), target)).find((f) => f.mimeType !== FOLDER_MIME) ?? null;
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const rel = this.relOf(key);
    const attempt = async () => {
      const parentId = await this.folders.ensure(parentOf(rel));
      const existing = (await this.folders.lookup(parentId, baseName(rel), key)).find((f) => f.mimeType !== FOLDER_MIME);
      const target = existing ? { update: existing.id } : { create: { name: baseName(rel), parentId } };
      await uploadFile(this.api, this.settings, target, key, body, size);
    };
    try {
      await attempt();
    } catch (err) {
      // A cached folder that was deleted behind our back: forget the ids and try once more (only a replayable body).
      if (!(err instanceof ApiRequestError && err.status === 404 && body instanceof Uint8Array)) throw err;
      this.folders.reset();
      await attempt();
    }
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const file = await this.findFile(this.relOf(key), key);
    if (!file) throw new ObjectNotFoundError(key);
    const headers: Record<string, string> = range ? { range: `bytes=${range.start}-${range.end ?? ""}` } : {};
    const response = await this.api.send({
      method: "GET",
      url: `${this.settings.filesUrl}/${encodeURIComponent(file.id)}?alt=media`,
      target: key,
      headers,
      accept: [404, 416],
    });
    await refuseMissingOrBadRange(response, key, range);
    return rangedResult(response, range, "Google Drive", file.size === undefined ? undefined : Number(file.size));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const file = await this.findFile(this.relOf(key), key);
    if (!file || file.size === undefined) return null;
    return { key, size: Number(file.size), modified: file.modifiedTime ? new Date(file.modifiedTime) : undefined };
  }

  async delete(key: string): Promise<void> {
    const file = await this.findFile(this.relOf(key), key);
    if (!file) return;
    const url = `${this.settings.filesUrl}/${encodeURIComponent(file.id)}`;
    const response = this.settings.useTrash
      ? await this.api.send({
          method: "PATCH",
          url: `${url}?fields=id`,
          target: key,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ trashed: true }),
          accept: [404],
        })
      : await this.api.send({ method: "DELETE", url, target: key, accept: [404] });
    await response.body?.cancel().catch(() => {});
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    const dirKey = dirOfPrefix(prefix);
    const root = this.settings.root;
    const folderId = await this.folders.find(root && dirKey ? `${root}/${dirKey}` : root || dirKey);
    if (folderId) yield* this.walk(folderId, dirKey, prefix);
  }

  /**
   * Page by page: each page's files are yielded, then its folders walked, before the next page is
   * asked for. Memory holds one page per folder level, never a whole folder, so the drain's
   * batching and heartbeat act on a listing of any length (see oauth/paging.ts for its end).
   */
  private async *walk(folderId: string, dirKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    checkWalkDepth("Google Drive", dirKey);
    const guard = folderPageGuard("Google Drive");
    const q = `${queryString(folderId)} in parents and trashed = false`;
    let pageToken: string | undefined;
    do {
      const page = await this.folders.listPage(q, dirKey ? `${dirKey}/` : "/", pageToken);
      const found: ObjectInfo[] = [];
      const folders: { key: string; id: string }[] = [];
      for (const file of page.files) {
        const key = dirKey ? `${dirKey}/${file.name}` : file.name;
        if (file.mimeType === FOLDER_MIME) folders.push({ key, id: file.id });
        // Google Docs have no size: they are not objects Kura can have written.
        else if (file.size !== undefined && key.startsWith(prefix)) {
          found.push({ key, size: Number(file.size), modified: file.modifiedTime ? new Date(file.modifiedTime) : undefined });
        }
      }
      yield* found.sort(byKey);
      for (const folder of folders.sort((a, b) => (a.key < b.key ? -1 : 1))) {
        if (mayHoldPrefix(folder.key, prefix)) yield* this.walk(folder.id, folder.key, prefix);
      }
      pageToken = page.nextPageToken === undefined ? undefined : guard.follow(page.nextPageToken, page.files.length);
    } while (pageToken);
  }

  async probe(deep: boolean): Promise<void> {
    const response = await this.api.send({
      method: "GET",
      url: `${this.settings.filesUrl}/${encodeURIComponent(this.settings.rootFolderId)}?fields=${FILE_FIELDS}`,
      target: "root_folder_id",
      headers: { accept: "application/json" },
      accept: [404],
    });
    if (response.status === 404) {
      await response.body?.cancel().catch(() => {});
      throw new OAuthError("Google Drive 根文件夹不存在，请检查 root_folder_id");
    }
    const root = await this.api.readJson<DriveFile>(response);
    if (root.mimeType !== FOLDER_MIME) throw new OAuthError("Google Drive root_folder_id 不是文件夹");
    if (deep) await roundTripProbe(this, "Google Drive");
  }
}
