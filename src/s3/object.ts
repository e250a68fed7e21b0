/** One S3 object as the /s3/ surface sees it: an image reference with its key, metadata and blob. */
export interface S3Object {
  id: string;
  blob_id: number;
  object_key: string;
  created_at: string;
  s3_meta: string;
  mime: string;
  size: number;
  md5: string;
  storage_key: string;
  /** The blob's SHA-256 hex ('' for folder markers). */
  sha256: string;
}
