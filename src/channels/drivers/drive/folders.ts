import type { OAuthApiClient } from "../../oauth/api-client";
import { baseName, parentOf } from "../../oauth/driver-kit";
import { directoryTarget } from "../driver-errors";
import { invalidListing } from "../../oauth/paging";
import { FILE_FIELDS, FOLDER_MIME, queryString, type DriveFile, type DriveSettings } from "./config";

/**
 * Google Drive addresses files by id, not path: a path is resolved one folder
 * at a time with files.list, and folder ids are cached (rclone's dircache).
 * Folder creation is single-flight per path, because Drive happily keeps two
 * folders of the same name and concurrent uploads would otherwise make both.
 */
export class DriveFolders {
  private readonly ids = new Map<string, string>();
  private readonly creating = new Map<string, Promise<string>>();

  constructor(
    private readonly api: OAuthApiClient,
    private readonly settings: DriveSettings,
  ) {
    this.ids.set("", settings.rootFolderId);
  }

  /** How errors name a folder: relative to the configured `path`, which is configuration and not named (spec 6.3). */
  private target(dir: string): string {
    return directoryTarget(this.settings.root, dir, this.settings.root ? "path 指定的文件夹" : "根文件夹");
  }

  /** Forget cached ids (a folder was deleted behind our back). */
  reset(): void {
    this.ids.clear();
    this.ids.set("", this.settings.rootFolderId);
  }

  /** Children of a folder named `name` (not trashed), files and folders alike. */
  async lookup(parentId: string, name: string, target: string): Promise<DriveFile[]> {
    const q = `name = ${queryString(name)} and ${queryString(parentId)} in parents and trashed = false`;
    return (await this.listPage(q, target)).files;
  }

  /** One page of files.list (checked: see drivePage). */
  async listPage(q: string, target: string, pageToken?: string): Promise<DrivePage> {
    const params = new URLSearchParams({ q, fields: `nextPageToken,files(${FILE_FIELDS})`, pageSize: "1000" });
    if (pageToken) params.set("pageToken", pageToken);
    return drivePage(await this.api.json<unknown>({ method: "GET", url: `${this.settings.filesUrl}?${params}`, target }));
  }

  /** Id of the folder at `dir` (relative to the drive root, "" = root), or null when it does not exist. */
  async find(dir: string): Promise<string | null> {
    const cached = this.ids.get(dir);
    if (cached) return cached;
    const parentId = await this.find(parentOf(dir));
    if (!parentId) return null;
    const folder = (await this.lookup(parentId, baseName(dir), this.target(dir))).find((f) => f.mimeType === FOLDER_MIME);
    if (!folder) return null;
    this.ids.set(dir, folder.id);
    return folder.id;
  }

  /** Id of the folder at `dir`, creating it and any missing ancestors. */
  async ensure(dir: string): Promise<string> {
    const cached = this.ids.get(dir);
    if (cached) return cached;
    let pending = this.creating.get(dir);
    if (!pending) {
      pending = this.create(dir).finally(() => this.creating.delete(dir));
      this.creating.set(dir, pending);
    }
    return pending;
  }

  private async create(dir: string): Promise<string> {
    const existing = await this.find(dir);
    if (existing) return existing;
    const parentId = await this.ensure(parentOf(dir));
    const folder = await this.api.json<DriveFile>({
      method: "POST",
      url: `${this.settings.filesUrl}?fields=${FILE_FIELDS}`,
      target: this.target(dir),
      body: { name: baseName(dir), mimeType: FOLDER_MIME, parents: [parentId] },
    });
    this.ids.set(dir, folder.id);
    return folder.id;
  }
}

export interface DrivePage {
  files: DriveFile[];
  /** The next page's token; undefined on the last page. */
  nextPageToken?: string;
}

/**
 * A files.list answer, refused unless it has the shape Drive always sends: `files` is never
 * missing from a real answer, so `{}` or `null` (an error object of a proxy, a cut answer) must
 * not read as an empty folder, after which a purge would remove a channel whose objects remain.
 */
export function drivePage(answer: unknown): DrivePage {
  const fail = (why: string) => invalidListing("Google Drive", why);
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) throw fail("不是 JSON 对象");
  const { files, nextPageToken } = answer as { files?: unknown; nextPageToken?: unknown };
  if (!Array.isArray(files)) throw fail("缺少 files 数组");
  if (nextPageToken !== undefined && typeof nextPageToken !== "string") throw fail("nextPageToken 不是字符串");
  for (const file of files as Partial<Record<keyof DriveFile, unknown>>[]) {
    const valid =
      typeof file === "object" &&
      file !== null &&
      typeof file.id === "string" &&
      typeof file.name === "string" &&
      (file.size === undefined || (typeof file.size === "string" && /^\d{1,16}$/.test(file.size)));
    if (!valid) throw fail("files 中有无效的条目");
  }
  return { files: files as DriveFile[], nextPageToken: nextPageToken || undefined };
}
