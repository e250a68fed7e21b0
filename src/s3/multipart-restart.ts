/**
 * Open S3 multipart uploads go on after a restart (an upgrade's `systemctl restart kura` in the middle
 * of an rclone sync of large files used to fail every upload in flight with NoSuchUpload). Their rows
 * stay, and each start matches them with the part files kept under <data_dir>/multipart/:
 * - a part the stop cut off mid-body (`*.partial`) goes: it was never acknowledged;
 * - a folder without a row goes (its Complete or Abort removed the row; the stop came before the folder);
 * - each row's staged bytes become the sizes of its part files, so quota and the `max_upload_mb` budget
 *   count what is on disk (a stop between a part's move and its count, a restored snapshot).
 * A row whose folder is gone (a snapshot from before its parts) has no parts: Complete answers
 * InvalidPart and the client starts that file over. Abandoned uploads still expire after
 * `s3_multipart_expiry_hours`.
 */
import type { Database } from "bun:sqlite";
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { inWriteTransaction } from "../db/write-transaction";
import type { Logger } from "../ops/log";
import { PART_FILE } from "./multipart-store";
import { allUploadStaging, setStagedBytes } from "./repo";

export function reconcileMultipartUploads(db: Database, dir: string, log: Pick<Logger, "info">): void {
  const rows = allUploadStaging(db);
  const open = new Set(rows.map((r) => r.upload_id));
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!(entry.isDirectory() && open.has(entry.name))) rmSync(join(dir, entry.name), { recursive: true, force: true });
  }
  inWriteTransaction(db, () => {
    for (const row of rows) {
      const bytes = partBytes(join(dir, row.upload_id));
      if (bytes !== row.staged_bytes) setStagedBytes(db, row.upload_id, bytes);
    }
  });
  if (rows.length) log.info("未完成的 S3 分片上传已保留，客户端可继续上传", { uploads: rows.length });
}

/** Bytes of the stored parts in an upload's folder (0 without one). */
function partBytes(folder: string): number {
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
  return names.filter((n) => PART_FILE.test(n)).reduce((sum, n) => sum + statSync(join(folder, n)).size, 0);
}
