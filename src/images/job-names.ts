/** The image pipeline's job kinds (payloads in ../jobs/kinds.ts). */
export const REPLICATE_JOB = "blob.replicate";
export const PHASH_JOB = "blob.phash";
export const BLOB_DELETE_JOB = "blob.delete";
