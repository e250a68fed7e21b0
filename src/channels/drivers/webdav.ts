import { createHash } from "node:crypto";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult, type ObjectInfo } from "../driver";
import { readBoundedText } from "../../shared/bounded-read";
import { contentTypeOf } from "./content-type";
import { ANSWER_MAX_BYTES, answerTooLarge, bodyReadError, directoryTarget } from "./driver-errors";
import { partialResult, rangeHeader, wholeResult } from "./http-range";
import type { HttpDriverOptions } from "./http-transport";
import { assertSafeKey, assertSafePrefix } from "./object-key";
import { roundTripProbe } from "./round-trip-probe";
import { uploadPayload } from "./sized-body";
import { DavClient } from "./webdav/client";
import { resolveWebdavSettings, usesOwncloudExtensions, type WebdavSettings } from "./webdav/config";
import { WebdavRequestError } from "./webdav/errors";
import { OWNCLOUD_PROPFIND, parseMultistatus, STANDARD_PROPFIND, type DavEntry } from "./webdav/multistatus";
import { parentOf, relativeFromHref, urlOf } from "./webdav/paths";

export { webdavDriverOptions, WEBDAV_VENDORS } from "./webdav/config";

export type WebdavDriverOptions = HttpDriverOptions;

/** MKCOL answers that mean "already there" (RFC leaves it open; rclone's list). */
const MKCOL_EXISTS = new Set([405, 406, 423]);

export function createWebdavDriver(config: Record<string, string>, opts: WebdavDriverOptions = {}): Driver {
  return new WebdavDriver(resolveWebdavSettings(config), opts);
}

/**
 * A WebDAV collection as object storage. Writes go straight to the target name:
 * servers commit a PUT only once the whole body arrived (Apache mod_dav_fs and
 * Nextcloud write to a temporary file first), and a body shorter than its
 * Content-Length never completes. Vendor quirks follow rclone where harmless:
 * nextcloud/owncloud get X-OC-Mtime and, when the bytes are known up front, an
 * OC-Checksum the server verifies/stores; their PROPFINDs ask for oc:checksums.
 */
class WebdavDriver implements Driver {
  readonly kind = "webdav";
  private readonly client: DavClient;
  private readonly timeoutMs: number;
  /** Directories (relative to the endpoint) known to exist, so puts skip MKCOL. */
  private readonly knownDirs = new Set<string>();
  private readonly creatingDirs = new Map<string, Promise<void>>();

  constructor(
    private readonly settings: WebdavSettings,
    opts: WebdavDriverOptions,
  ) {
    this.client = new DavClient(settings, opts.fetch ?? fetch);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** Path of a key relative to the endpoint (the configured `path` applied). */
  private relOf(key: string): string {
    assertSafeKey(key);
    return this.settings.root ? `${this.settings.root}/${key}` : key;
  }

  private url(relative: string, collection = false): string {
    return urlOf(this.settings.endpoint, relative, collection);
  }

  /**
   * How errors name a directory (relative to the endpoint): relative to the configured `path`, as
   * keys are. Neither the url nor the path is named: they are configuration (spec 6.3).
   */
  private dirTarget(relative: string): string {
    return directoryTarget(this.settings.root, relative, this.settings.root ? "path 指定的目录" : "url 指定的目录");
  }

  async put(key: string, body: ReadableStream<Uint8Array> | Uint8Array, size: number): Promise<void> {
    const rel = this.relOf(key);
    // Replayable bodies may be sent twice (after a vanished parent or a stale connection).
    const payload = await uploadPayload(body, size);
    const headers: Record<string, string> = { "Content-Length": String(size), "Content-Type": contentTypeOf(key) };
    if (usesOwncloudExtensions(this.settings.vendor)) {
      headers["X-OC-Mtime"] = String(Math.floor(Date.now() / 1000));
      if (payload instanceof Uint8Array) headers["OC-Checksum"] = `SHA1:${createHash("sha1").update(payload).digest("hex")}`;
    }
    const send = () =>
      this.client.send({
        method: "PUT",
        url: this.url(rel),
        target: key,
        headers,
        body: payload,
        // A slow uplink must not fail a large upload: allow ~1 s per 64 KiB on top.
        timeoutMs: this.timeoutMs + Math.ceil(size / 65536) * 1000,
      });
    await this.ensureDir(parentOf(rel));
    try {
      let response: Response;
      try {
        response = await send();
      } catch (err) {
        // 409: a parent we believed in is gone (deleted behind our back): forget and rebuild.
        if (!(err instanceof WebdavRequestError && err.status === 409 && payload instanceof Uint8Array)) throw err;
        this.knownDirs.clear();
        await this.ensureDir(parentOf(rel));
        response = await send();
      }
      await response.body?.cancel().catch(() => {});
    } catch (err) {
      if (err instanceof WebdavRequestError && err.status === 409) this.knownDirs.clear();
      await this.removeTruncated(key, size);
      throw err;
    }
  }

  /**
   * After a failed upload, a server that does not stage uploads may hold a short
   * file under the final name; like rclone we remove it, but only when it really
   * is the wrong size, so an intact older version survives a failed overwrite.
   */
  private async removeTruncated(key: string, size: number): Promise<void> {
    try {
      const info = await this.head(key);
      if (info && info.size !== size) await this.delete(key);
    } catch {
      // Best effort: the upload error is what the caller needs to see.
    }
  }

  /** MKCOL for `dir` and any missing ancestors (relative to the endpoint, which must exist). */
  private async ensureDir(dir: string): Promise<void> {
    if (dir === "" || this.knownDirs.has(dir)) return;
    let pending = this.creatingDirs.get(dir);
    if (!pending) {
      pending = this.createDir(dir).finally(() => this.creatingDirs.delete(dir));
      this.creatingDirs.set(dir, pending);
    }
    await pending;
  }

  private async createDir(dir: string): Promise<void> {
    let status = await this.mkcol(dir);
    if (status === 409) {
      // Intermediate collection missing: create the parents first, then retry.
      await this.ensureDir(parentOf(dir));
      status = await this.mkcol(dir);
    }
    if (status >= 200 && status < 300) {
      this.knownDirs.add(dir);
      return;
    }
    // Some servers answer odd codes for an existing collection: believe a PROPFIND.
    if (MKCOL_EXISTS.has(status) || (await this.propfind(dir, true, "0").catch(() => null))?.[0]?.collection) {
      this.knownDirs.add(dir);
      return;
    }
    throw new WebdavRequestError("MKCOL", status, this.dirTarget(dir));
  }

  private async mkcol(dir: string): Promise<number> {
    const response = await this.client.send({
      method: "MKCOL",
      url: this.url(dir, true),
      target: this.dirTarget(dir),
      accept: [405, 406, 409, 423],
      timeoutMs: this.timeoutMs,
    });
    await response.body?.cancel().catch(() => {});
    return response.status;
  }

  async get(key: string, range?: ByteRange): Promise<GetResult> {
    const rel = this.relOf(key);
    const headers: Record<string, string> = {};
    if (range) headers.Range = rangeHeader(range);
    const response = await this.client.send({
      method: "GET",
      url: this.url(rel),
      target: key,
      headers,
      accept: [404, 410, 416],
      timeoutMs: this.timeoutMs,
    });
    const stream = response.body ?? new Blob([]).stream();
    if (response.status === 404 || response.status === 410) {
      await stream.cancel();
      throw new ObjectNotFoundError(key);
    }
    if (response.status === 416) {
      await stream.cancel();
      throw new RangeError(`请求的范围无效: ${range?.start}-${range?.end ?? ""}`);
    }
    if (response.status === 206 && range) return partialResult(stream, response.headers.get("content-range"), range, "WebDAV");
    let total = Number(response.headers.get("content-length") ?? "NaN");
    if (!Number.isSafeInteger(total)) {
      // Chunked answer without a length: the size has to come from PROPFIND.
      const info = await this.head(key).catch(() => null);
      if (!info) {
        await stream.cancel();
        throw new Error(`WebDAV 响应缺少 Content-Length: ${key}`);
      }
      total = info.size;
    }
    // Without Content-Length only PROPFIND's size bounds the body (wholeResult holds it to that).
    return wholeResult(stream, total, range, "WebDAV");
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const entries = await this.propfind(this.relOf(key), false, "0", key);
    const entry = entries?.[0];
    if (!entry?.ok || entry.collection) return null;
    if (entry.size === undefined) throw new Error(`WebDAV 响应缺少 getcontentlength: ${key}`);
    return { key, size: entry.size, modified: entry.modified };
  }

  async delete(key: string): Promise<void> {
    const response = await this.client.send({
      method: "DELETE",
      url: this.url(this.relOf(key)),
      target: key,
      accept: [404, 410],
      timeoutMs: this.timeoutMs,
    });
    await response.body?.cancel().catch(() => {});
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertSafePrefix(prefix);
    // Walk only the deepest collection the prefix fully names; the rest is filtered.
    const dirPart = prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/")) : "";
    yield* this.walk(dirPart, prefix);
  }

  /** Depth-1 PROPFIND per collection (Depth: infinity is often disabled), recursing into sub-collections. */
  private async *walk(dirKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    const root = this.settings.root;
    const dirRel = root && dirKey ? `${root}/${dirKey}` : root || dirKey;
    const entries = await this.propfind(dirRel, true, "1");
    if (!entries) return;
    const base = root ? `${root}/` : "";
    const found: { key: string; entry: DavEntry }[] = [];
    for (const entry of entries) {
      const rel = relativeFromHref(entry.href, this.settings.endpoint);
      if (rel === null || rel === dirRel || !entry.ok) continue;
      if (!rel.startsWith(base) || (dirKey && !rel.startsWith(`${base}${dirKey}/`))) continue;
      found.push({ key: rel.slice(base.length), entry });
    }
    found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const { key, entry } of found) {
      if (entry.collection) {
        // Descend only where keys can still match the prefix.
        if (`${key}/`.startsWith(prefix) || prefix.startsWith(`${key}/`)) yield* this.walk(key, prefix);
      } else if (key.startsWith(prefix) && entry.size !== undefined) {
        yield { key, size: entry.size, modified: entry.modified };
      }
    }
  }

  /** PROPFIND on `relative` (named `target` in errors: a key, or the directory by default); null when it does not exist. */
  private async propfind(relative: string, collection: boolean, depth: "0" | "1", target = this.dirTarget(relative)): Promise<DavEntry[] | null> {
    const response = await this.client.send({
      method: "PROPFIND",
      url: this.url(relative, collection),
      target,
      headers: { Depth: depth, "Content-Type": "application/xml; charset=utf-8" },
      body: usesOwncloudExtensions(this.settings.vendor) ? OWNCLOUD_PROPFIND : STANDARD_PROPFIND,
      accept: [404, 410],
      timeoutMs: this.timeoutMs,
    });
    if (response.status === 404 || response.status === 410) {
      await response.body?.cancel().catch(() => {});
      return null;
    }
    if (response.status !== 207) {
      await response.body?.cancel().catch(() => {});
      throw new Error(`WebDAV PROPFIND 返回了意外的状态 ${response.status}，url 可能不是 WebDAV 地址`);
    }
    // Bounded: the peer (or a proxy in front of it) chooses how much it sends.
    const text = await readBoundedText(response, ANSWER_MAX_BYTES, answerTooLarge("WebDAV PROPFIND ", ANSWER_MAX_BYTES)).catch((err) => {
      throw bodyReadError(err, "WebDAV");
    });
    return parseMultistatus(text);
  }

  async probe(deep: boolean): Promise<void> {
    const root = this.settings.root;
    const entries = await this.propfind(root, true, "0");
    if (!entries) {
      // The endpoint itself must exist; a missing `path` below it is created like put would.
      if (root === "") throw new Error("WebDAV 地址不存在：url 指定的目录在服务器上不存在，请检查 url");
      await this.ensureDir(root);
    } else if (!entries[0]?.collection) {
      throw new Error(root ? "WebDAV path 指定的路径不是目录" : "WebDAV url 指向的不是目录");
    } else if (root !== "") {
      this.knownDirs.add(root);
    }
    if (deep) await roundTripProbe(this, "WebDAV");
  }
}
