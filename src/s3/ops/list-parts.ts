/**
 * ListParts (`GET key?uploadId=…`): the stored parts of one open upload in part-number order, paged by
 * part-number-marker / max-parts. Clients that resume an interrupted upload (mc, Cyberduck,
 * `aws s3api list-parts` scripts) ask for it to send only the missing parts. A part still arriving is
 * not listed: it takes its place only once its body is complete (multipart.ts).
 */
import { stat } from "node:fs/promises";
import type { AppContext } from "../../context";
import { S3Error } from "../errors";
import { partsDir, storedParts } from "../multipart-store";
import { encodesNames, nameEncoder, type S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";
import { findUpload } from "./multipart";

/** A non-negative integer query value, `fallback` when absent; S3 answers anything else with InvalidArgument. */
function counter(req: S3Request, name: string, fallback: number): number {
  const raw = req.query.get(name);
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d{1,9}$/.test(raw)) throw new S3Error("InvalidArgument", `${name} 必须是非负整数`);
  return Number(raw);
}

export async function listParts(app: AppContext, req: S3Request): Promise<Response> {
  const upload = findUpload(app, req);
  const marker = counter(req, "part-number-marker", 0);
  const maxParts = Math.min(counter(req, "max-parts", 1000), 1000);
  const enc = nameEncoder(req);
  // max-parts=0 asks for nothing: an empty page that is not truncated (as max-keys=0 in list.ts). Called
  // truncated, it sent a "while IsTruncated" client back with NextPartNumberMarker = the same marker, forever.
  const numbers = maxParts > 0 ? [...(await storedParts(partsDir(app, upload.upload_id))).entries()].filter(([n]) => n > marker).sort(([a], [b]) => a - b) : [];
  const page = numbers.slice(0, maxParts);
  const truncated = numbers.length > page.length;
  const parts = [];
  for (const [n, part] of page) {
    // Replaced or removed by a Complete or Abort since the directory was read: no longer a part.
    const info = await stat(part.path).catch(() => undefined);
    if (info) parts.push(el("Part", [el("PartNumber", n), el("LastModified", info.mtime.toISOString()), el("ETag", `"${part.md5}"`), el("Size", info.size)]));
  }
  const who = [el("ID", req.user.id), el("DisplayName", req.user.name)];
  return xmlResponse(
    el(
      "ListPartsResult",
      [
        el("Bucket", req.bucket),
        el("Key", enc(upload.object_key)),
        el("UploadId", upload.upload_id),
        el("Initiator", who),
        el("Owner", who),
        el("StorageClass", "STANDARD"),
        el("PartNumberMarker", marker),
        el("NextPartNumberMarker", page.at(-1)?.[0] ?? marker),
        el("MaxParts", maxParts),
        encodesNames(req) ? el("EncodingType", "url") : undefined,
        el("IsTruncated", truncated),
        parts,
      ],
      { xmlns: S3_NS },
    ),
  );
}
