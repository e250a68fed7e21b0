/**
 * ListMultipartUploads (`GET /s3/kura?uploads`): the user's open uploads in key, then upload-id order,
 * paged by key-marker/upload-id-marker, grouped by delimiter. `rclone cleanup` and
 * `rclone backend list-multipart-uploads` use it to find abandoned uploads.
 */
import type { AppContext } from "../../context";
import { parseSqlTime } from "../../db/time";
import { uploadsAfter } from "../multipart-store";
import { encodesNames, nameEncoder, pageSizeOf, type S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";
import { afterPrefix, isCommonPrefix } from "./list";

/**
 * Where the page starts, as the (key, upload id) to list strictly after: a key marker without
 * upload-id-marker skips that key's uploads ("~" sorts after every hex id); a CommonPrefix marker
 * skips its whole group, so the page starts at the first key after the group ("" lets that key's
 * uploads in, as no upload id is empty). undefined when nothing can follow.
 */
function startAfter(keyMarker: string, uploadIdMarker: string, prefix: string, delimiter: string): { key: string; uploadId: string } | undefined {
  if (!isCommonPrefix(keyMarker, prefix, delimiter)) return { key: keyMarker, uploadId: uploadIdMarker || "~" };
  const next = afterPrefix(keyMarker);
  return next === undefined ? undefined : { key: next, uploadId: "" };
}

export function listMultipartUploads(app: AppContext, req: S3Request): Response {
  const prefix = req.query.get("prefix") ?? "";
  const delimiter = req.query.get("delimiter") ?? "";
  const keyMarker = req.query.get("key-marker") ?? "";
  // Without a key marker the upload-id marker is ignored, as S3 does.
  const uploadIdMarker = keyMarker ? (req.query.get("upload-id-marker") ?? "") : "";
  const maxUploads = pageSizeOf(req, "max-uploads");
  const enc = nameEncoder(req);

  const start = startAfter(keyMarker, uploadIdMarker, prefix, delimiter);
  // Open uploads per user are few (multipart-store caps them), so one query covers every page.
  // max-uploads=0 lists nothing and is not truncated (as max-keys=0 in list.ts).
  const rows = start && maxUploads > 0 ? uploadsAfter(app, req.user.id, prefix, start.key, start.uploadId, 100_000) : [];
  const uploads: typeof rows = [];
  const prefixes: string[] = [];
  let truncated = false;
  let last: { key: string; uploadId: string } | undefined;
  for (const row of rows) {
    const cut = delimiter ? row.object_key.indexOf(delimiter, prefix.length) : -1;
    const common = cut >= 0 ? row.object_key.slice(0, cut + delimiter.length) : undefined;
    if (common !== undefined && prefixes.at(-1) === common) continue;
    if (uploads.length + prefixes.length >= maxUploads) {
      truncated = true;
      break;
    }
    if (common !== undefined) {
      prefixes.push(common);
      last = { key: common, uploadId: "" };
    } else {
      uploads.push(row);
      last = { key: row.object_key, uploadId: row.upload_id };
    }
  }
  const who = [el("ID", req.user.id), el("DisplayName", req.user.name)];
  return xmlResponse(
    el(
      "ListMultipartUploadsResult",
      [
        el("Bucket", req.bucket),
        el("KeyMarker", enc(keyMarker)),
        el("UploadIdMarker", uploadIdMarker),
        truncated && last ? [el("NextKeyMarker", enc(last.key)), el("NextUploadIdMarker", last.uploadId)] : undefined,
        delimiter ? el("Delimiter", enc(delimiter)) : undefined,
        el("Prefix", enc(prefix)),
        el("MaxUploads", maxUploads),
        encodesNames(req) ? el("EncodingType", "url") : undefined,
        el("IsTruncated", truncated),
        uploads.map((u) =>
          el("Upload", [
            el("Key", enc(u.object_key)),
            el("UploadId", u.upload_id),
            el("Initiator", who),
            el("Owner", who),
            el("StorageClass", "STANDARD"),
            el("Initiated", parseSqlTime(u.created_at).toISOString()),
          ]),
        ),
        prefixes.map((p) => el("CommonPrefixes", el("Prefix", enc(p)))),
      ],
      { xmlns: S3_NS },
    ),
  );
}
