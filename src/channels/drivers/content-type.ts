/**
 * The Content-Type stored with an object, from its key's extension. A sensible
 * one lets a browser render the object when the storage serves it directly
 * (S3 302 links, a WebDAV server's own file view).
 */
export function contentTypeOf(key: string): string {
  return Bun.file(key).type.split(";")[0] || "application/octet-stream";
}
