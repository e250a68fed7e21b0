import { randomBytes } from "node:crypto";
import type { OAuthApiClient } from "../../oauth/api-client";
import { chunksOf, toBytes } from "../../oauth/body";
import { OAuthError } from "../../oauth/errors";
import { FILE_FIELDS, type DriveSettings } from "./config";

/** Where the bytes go: a new file in a folder, or new content for an existing file id. */
export type UploadTarget = { create: { name: string; parentId: string } } | { update: string };

/**
 * Uploads like rclone: up to upload_cutoff in one multipart/related request,
 * larger files through a resumable session in chunk_size pieces. Overwriting
 * updates the existing file's content (same id), since Drive would otherwise
 * keep two files with the same name.
 */
export async function uploadFile(
  api: OAuthApiClient,
  settings: DriveSettings,
  target: UploadTarget,
  key: string,
  body: ReadableStream<Uint8Array> | Uint8Array,
  size: number,
): Promise<void> {
  const [method, url] =
    "update" in target ? (["PATCH", `${settings.uploadUrl}/${encodeURIComponent(target.update)}`] as const) : (["POST", settings.uploadUrl] as const);
  // parents may only be set on create; an update sends empty metadata.
  const metadata = "create" in target ? { name: target.create.name, parents: [target.create.parentId] } : {};
  if (size <= settings.uploadCutoff) {
    const bytes = await toBytes(body, size);
    const boundary = `kura-${randomBytes(12).toString("hex")}`;
    const response = await api.send({
      method,
      url: `${url}?uploadType=multipart&fields=${FILE_FIELDS}`,
      target: key,
      headers: { "content-type": `multipart/related; boundary=${boundary}` },
      body: multipartRelated(boundary, metadata, bytes),
    });
    await response.body?.cancel().catch(() => {});
    return;
  }
  const start = await api.send({
    method,
    url: `${url}?uploadType=resumable&fields=${FILE_FIELDS}`,
    target: key,
    headers: {
      "content-type": "application/json; charset=UTF-8",
      "x-upload-content-type": "application/octet-stream",
      "x-upload-content-length": String(size),
    },
    body: JSON.stringify(metadata),
  });
  await start.body?.cancel().catch(() => {});
  const session = sessionUrl(start.headers.get("location"), settings.uploadUrl);
  let offset = 0;
  for await (const chunk of chunksOf(body, size, settings.chunkSize)) {
    const end = offset + chunk.byteLength - 1;
    const response = await api.send({
      method: "PUT",
      url: session,
      target: key,
      headers: { "content-range": `bytes ${offset}-${end}/${size}` },
      body: chunk,
      // 308 "Resume Incomplete" acknowledges every chunk but the last.
      accept: [308],
      timeoutMs: 60_000 + Math.ceil(chunk.byteLength / 65536) * 1000,
    });
    await response.body?.cancel().catch(() => {});
    const last = end === size - 1;
    if (last !== (response.status !== 308)) throw new OAuthError(`Google Drive 续传返回了意外的状态 ${response.status}: ${key}`);
    offset = end + 1;
  }
}

/**
 * The resumable session's address. Its chunks carry the access token, so it must be on the
 * upload API's own origin (https://www.googleapis.com; a test's apiBase): a session named on
 * another host or over plain http, by a proxy or CDN in front of the API, never sees the token.
 */
function sessionUrl(location: string | null, uploadUrl: string): string {
  let url: URL | undefined;
  try {
    url = location ? new URL(location) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol)) throw new OAuthError("Google Drive 未返回有效的续传会话地址");
  if (url.origin !== new URL(uploadUrl).origin) throw new OAuthError("Google Drive 的续传会话地址不在接口的主机上，已拒绝（不会发送授权令牌）");
  return url.href;
}

function multipartRelated(boundary: string, metadata: object, bytes: Uint8Array): Uint8Array {
  const head = `--${boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n${JSON.stringify(metadata)}\r\n--${boundary}\r\ncontent-type: application/octet-stream\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const enc = new TextEncoder();
  const a = enc.encode(head);
  const c = enc.encode(tail);
  const out = new Uint8Array(a.byteLength + bytes.byteLength + c.byteLength);
  out.set(a, 0);
  out.set(bytes, a.byteLength);
  out.set(c, a.byteLength + bytes.byteLength);
  return out;
}
