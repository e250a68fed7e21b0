// Why an image is on the cleanup review list (images.cleanup_reason): 'cold' (NULL in rows from
// before the column) when not publicly accessed for cold_cleanup_days, 'superseded' when its
// object key was re-pointed to a later upload.

/** SQL condition for rows whose mark is (or would be) a cold one: cold judging and access re-decide only these. */
export const COLD_MARK = "COALESCE(cleanup_reason, 'cold') = 'cold'";
