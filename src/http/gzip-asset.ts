/**
 * Large text the server sends as it is stored (the API reference's 4.3 MB script, openapi.yaml),
 * gzip-compressed for clients that accept it: a VPS behind a slow uplink sent the docs page's
 * script at full size on every first visit (1.3 MB gzipped), and neither deploy/ proxy config
 * compresses. Compressed once, off the event loop, at the first request that asks for it; the
 * compressed copy is kept (the original stays where it was: the embedded file or the string).
 * The admin console's page (~100 KB, fetched again on every open but a 304) goes the same way.
 */
import { gzip } from "node:zlib";
import { promisify } from "node:util";
import { createHash } from "node:crypto";
import { ifNoneMatchMatches } from "../delivery/etag";
import { qValue } from "../shared/q-value";

const gzipAsync = promisify(gzip);

/** Whether an Accept-Encoding header allows gzip (RFC 9110 §12.5.3): listed with q > 0, or unlisted under a `*` with q > 0. */
export function acceptsGzip(header: string | null | undefined): boolean {
  if (!header) return false;
  let star: boolean | undefined;
  for (const member of header.split(",")) {
    const [coding, ...params] = member.split(";");
    const name = coding!.trim().toLowerCase();
    if (name === "gzip" || name === "x-gzip") return qValue(params) > 0;
    if (name === "*") star = qValue(params) > 0;
  }
  return star ?? false;
}

export class GzipAsset {
  #compressed: Promise<Uint8Array<ArrayBuffer>> | undefined;
  readonly #tags: { identity: string; gzip: string } | undefined;

  /**
   * `read` gives the bytes to compress, asked for once. `etag` (a quoted strong tag of the stored bytes) makes
   * answers revalidatable: the gzipped copy is another representation, so it is tagged `"…-gz"` (a strong
   * tag names one byte sequence, RFC 9110 §8.8.3), and If-None-Match with either tag answers 304.
   */
  constructor(
    private readonly read: () => Promise<Uint8Array> | Uint8Array,
    etag?: string,
  ) {
    if (etag) this.#tags = { identity: etag, gzip: `${etag.slice(0, -1)}-gz"` };
  }

  /**
   * The asset for `request`: gzipped when its Accept-Encoding allows, as `identity()` otherwise; 304 when it
   * holds either representation. Either way the answer varies on Accept-Encoding, so a shared cache keeps
   * the two apart.
   */
  async respond(request: Request, identity: () => BodyInit, headers: Record<string, string>): Promise<Response> {
    const gzip = acceptsGzip(request.headers.get("accept-encoding"));
    const tags = this.#tags;
    const varying = { ...headers, vary: "Accept-Encoding", ...(tags && { etag: gzip ? tags.gzip : tags.identity }) };
    if (tags) {
      const held = request.headers.get("if-none-match");
      if (ifNoneMatchMatches(held, tags.identity) || ifNoneMatchMatches(held, tags.gzip)) return new Response(null, { status: 304, headers: varying });
    }
    const plain = () => new Response(identity(), { headers: { ...varying, ...(tags && { etag: tags.identity }) } });
    if (!gzip) return plain();
    this.#compressed ??= Promise.resolve(this.read()).then(async (bytes) => new Uint8Array(await gzipAsync(bytes, { level: 9 })));
    try {
      return new Response(await this.#compressed, { headers: { ...varying, "content-encoding": "gzip" } });
    } catch {
      // Compression failed (memory): this answer goes out as it is stored, the next request tries again.
      this.#compressed = undefined;
      return plain();
    }
  }
}

/** A quoted strong ETag of fixed text: its SHA-256, 32 base64url characters. */
export function textEtag(text: string): string {
  return `"${createHash("sha256").update(text, "utf8").digest("base64url").slice(0, 32)}"`;
}
