import type { Database } from "bun:sqlite";

/**
 * Frees a user's object_key alias before it is given to a newer image (re-upload, S3 PutObject or
 * CopyObject onto a taken key). The image that held it is superseded: it keeps its /i/ link and still
 * counts in usage, so it goes to the cleanup review with reason "superseded" for the owner to remove
 * (unless it is exempt from cleanup).
 */
export function supersedeObjectKey(db: Database, userId: string, objectKey: string) {
  db.query(
    `UPDATE images SET object_key = NULL,
       pending_cleanup = CASE WHEN cleanup_exempt = 0 THEN 1 ELSE pending_cleanup END,
       cleanup_reason = CASE WHEN cleanup_exempt = 0 THEN 'superseded' ELSE cleanup_reason END
     WHERE user_id = ? AND object_key = ?`,
  ).run(userId, objectKey);
}
