/**
 * Object keys with `.` or `..` segments (`./a.jpg`, `a/../b.jpg`). S3 clients send a key as it is
 * (the AWS SDK encodes `.` as itself) and sign that path, but Bun resolves dot segments, `%2E` forms
 * included, before Kura sees the request (`/s3/kura/./a.jpg` arrives as `/s3/kura/a.jpg`; the raw
 * request target is not exposed). Such a request can never verify: it answered "signature does not
 * match, check your keys", and users checked their secret instead of their key.
 *
 * A failed signature is tried once more against the likely originals of the path it arrived with:
 * one `.` segment anywhere after the mount, or a leading `../` in the key (which took the bucket
 * with it: `/s3/kura/../a.jpg` arrives as `/s3/a.jpg`, and the bucket is known). A match proves the
 * client signed a key with dot segments, which is then refused as such. `a/../b.jpg` cannot be
 * recovered (the `a` is gone); its mismatch message names dot segments as a likely cause.
 */

/** Paths tried at most per request (bounds the HMACs a request with a failed signature costs). */
const MAX_ORIGINS = 64;

export const DOT_SEGMENT_KEY_MESSAGE =
  "对象键不能含 . 或 .. 路径段（如 ./a.jpg、a/../b.jpg）：服务器收到请求前会解析掉这些路径段，对象会落到另一个键上。请去掉键中的 ./ 与 ../ 后重试";

export const DOT_SEGMENT_HINT = "；若对象键含 . 或 .. 路径段（如 ./a.jpg、a/../b.jpg），服务器收到的路径已被解析，签名无法验证，请去掉键中的 ./ 与 ../";

/**
 * Raw paths that Bun would have resolved to `path`, for a surface mounted at `mount` whose only bucket
 * is `bucket`: one `.` segment inserted after the mount's own segments (`/s3/kura/a/.` arrives as
 * `/s3/kura/a/`, so a trailing empty segment may have been one), and `<bucket>/..` right after the mount.
 */
export function dotSegmentOrigins(path: string, mount: string, bucket: string): string[] {
  if (path !== mount && !path.startsWith(`${mount}/`)) return [];
  const segments = path.split("/");
  const first = mount.split("/").length;
  const origins: string[] = [`${mount}/${bucket}/..${path.slice(mount.length) || "/"}`];
  for (let i = first; i < segments.length; i++) origins.push([...segments.slice(0, i), ".", ...segments.slice(i)].join("/"));
  if (segments.length > first && segments.at(-1) === "") origins.push([...segments.slice(0, -1), "."].join("/"));
  return origins.slice(0, MAX_ORIGINS);
}
