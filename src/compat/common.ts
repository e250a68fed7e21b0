// What the Lsky Pro and Chevereto compatible surfaces share: the public address of an
// uploaded image, its resized forms, legacy digests, and the token taken from other places
// than `Authorization: Bearer`.
import type { AppContext } from "../context";
import { parseSqlTime } from "../db/time";
import { extensionPath, imageExtension } from "../shared/links";
import type { ImageView } from "../images/repo";
import { openBlob } from "../images/read";

/** The facts about one stored image that the compatible answers are built from. */
export interface CompatImage {
  id: string;
  /** Absolute `/i/<id>.<ext>` address: Lsky and Chevereto clients expect an extension. */
  url: string;
  extension: string;
  fileName: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  createdAt: string;
  /** When the image is deleted (UTC `YYYY-MM-DD HH:MM:SS`), or null when it is kept. */
  expireAt: string | null;
  widths: readonly number[] | null;
}

export function compatImage(app: AppContext, view: ImageView, origin: string): CompatImage {
  return {
    id: view.id,
    url: origin + extensionPath(view.id, view.mime),
    extension: imageExtension(view.mime),
    fileName: view.file_name,
    mime: view.mime,
    size: view.size,
    width: view.width,
    height: view.height,
    createdAt: view.created_at,
    expireAt: view.expire_at,
    widths: app.settings.get().process_widths,
  };
}

/**
 * MD5 and SHA-1 of a stored image read back from storage: only for an idempotent replay,
 * whose bytes the pipeline did not see this time.
 */
export async function storedDigests(app: AppContext, view: ImageView): Promise<{ md5: string; sha1: string }> {
  const md5 = new Bun.CryptoHasher("md5");
  const sha1 = new Bun.CryptoHasher("sha1");
  const blob = await openBlob(app, { id: view.blob_id, storage_key: view.storage_key });
  for await (const chunk of blob.stream as ReadableStream<Uint8Array>) {
    md5.update(chunk);
    sha1.update(chunk);
  }
  return { md5: md5.digest("hex"), sha1: sha1.digest("hex") };
}

/**
 * A stored UTC time (`YYYY-MM-DD HH:MM:SS`) in the server process's local time zone, same
 * format: Lsky's `date` (Carbon in the app's timezone, PRC by default) and Chevereto's `date`
 * (server-local, beside `date_gmt`). The zone is the process's (`TZ`, else /etc/localtime),
 * which a systemd service or a container inherits from its host or unit.
 */
export function localTime(utc: string): string {
  const d = parseSqlTime(utc);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** "刚刚", "5 分钟前", … like Lsky's `human_date` (Carbon diffForHumans in zh_CN). */
export function humanDate(createdAt: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.floor((now - parseSqlTime(createdAt).getTime()) / 1000));
  const steps: [number, string][] = [
    [365 * 86400, "年"],
    [30 * 86400, "个月"],
    [7 * 86400, "周"],
    [86400, "天"],
    [3600, "小时"],
    [60, "分钟"],
  ];
  for (const [size, unit] of steps) if (seconds >= size) return `${Math.floor(seconds / size)} ${unit}前`;
  return "刚刚";
}
