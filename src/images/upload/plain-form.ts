/**
 * Recognizes and reads the plain multipart forms that browsers, curl, PicGo, ShareX and the HTTP
 * libraries send: forms simple enough that a walk over the body finds every part exactly where
 * busboy (the streaming path's parser) finds it, so an in-memory body is read here without a
 * parser and without copying the file (its bytes stay a view of the body: ~0.1 ms of the loop and
 * two 200 KB copies less per upload than Bun's native `formData()`, which this replaced). Any
 * other form, however odd, goes to busboy on both paths, so a form's answer never depends on
 * whether it was sent with a Content-Length or chunked (a NUL or `filename*=` in a header, a
 * boundary over 70 characters, a 100 KB part header, LF-only line breaks and the like).
 * test/unit/multipart-paths.test.ts checks the agreement with busboy on random forms.
 *
 * A plain form: `multipart/form-data; boundary=B` with nothing else in the type; the body starts
 * with `--B` CRLF (no preamble); every part has CRLF line breaks and a header block of at most
 * MAX_PLAIN_HEADER_BYTES (busboy refuses 16 KiB) with exactly one
 * `Content-Disposition: form-data; name="…"` and an optional non-empty `filename="…"` (quoted,
 * no quote, backslash or control character inside; the reader keeps the name's last `/`
 * segment, as busboy does); only file parts may add a `Content-Type`, without parameters; each
 * delimiter is followed by CRLF, or by `--` and at most a CRLF that ends the body (busboy stops
 * at a close delimiter, whatever follows it).
 */
const MAX_PLAIN_HEADER_BYTES = 8 * 1024;

/** RFC 2046 boundary characters without the space; a token when unquoted. */
const TYPE_PATTERN = /^multipart\/form-data; ?boundary=(?:"([A-Za-z0-9'()+_,\-./:=?]{1,70})"|([A-Za-z0-9'+_\-.]{1,70}))$/i;
const QUOTED = String.raw`"([^"\\\x00-\x1f\x7f]*)"`;
/** busboy reads `filename=""` as a text field (most parsers as a file): an empty file name stays off the plain path. */
const QUOTED_NON_EMPTY = String.raw`"([^"\\\x00-\x1f\x7f]+)"`;
const DISPOSITION = new RegExp(`^content-disposition: ?form-data; ?name=${QUOTED}(?:; ?filename=${QUOTED_NON_EMPTY})?$`, "i");
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const CONTENT_TYPE = new RegExp(`^content-type: ?${TOKEN}/${TOKEN}$`, "i");

const CRLF = Buffer.from("\r\n");
const HEADERS_END = Buffer.from("\r\n\r\n");
const DASH_DASH = Buffer.from("--");

/**
 * One part of a plain form: its name and, for a file, its file name (both as busboy decodes them
 * with `defParamCharset: "utf8"`), and where its content lies in the body.
 */
export interface PlainPart {
  name: string;
  fileName?: string;
  start: number;
  end: number;
}

/** The parts of a plain form, in body order; undefined when the form is not plain. */
export function plainFormParts(body: Uint8Array, contentType: string): PlainPart[] | undefined {
  const match = TYPE_PATTERN.exec(contentType);
  if (!match) return undefined;
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const boundary = Buffer.from(`--${match[1] ?? match[2]}`);
  const delimiter = Buffer.concat([CRLF, boundary]);
  if (!startsWith(bytes, boundary, 0)) return undefined;
  const parts: PlainPart[] = [];
  let at = boundary.length;
  for (;;) {
    if (startsWith(bytes, DASH_DASH, at)) return at + 2 === bytes.length || (at + 4 === bytes.length && startsWith(bytes, CRLF, at + 2)) ? parts : undefined;
    if (!startsWith(bytes, CRLF, at)) return undefined;
    const headersStart = at + 2;
    const headersEnd = bytes.indexOf(HEADERS_END, headersStart);
    if (headersEnd < 0 || headersEnd - headersStart > MAX_PLAIN_HEADER_BYTES) return undefined;
    const disposition = plainDisposition(bytes.subarray(headersStart, headersEnd));
    if (!disposition) return undefined;
    // From the header block's last CRLF: a content that starts with the boundary, right after
    // the blank line, is read as an empty part by busboy and refused by other parsers: left to busboy.
    const next = bytes.indexOf(delimiter, headersEnd + CRLF.length);
    if (next < headersEnd + HEADERS_END.length) return undefined;
    parts.push({ ...disposition, start: headersEnd + HEADERS_END.length, end: next });
    at = next + delimiter.length;
  }
}

export const isPlainForm = (body: Uint8Array, contentType: string): boolean => plainFormParts(body, contentType) !== undefined;

/** A plain part's header block: its name and file name, or undefined when the block is not plain. */
function plainDisposition(block: Buffer): { name: string; fileName?: string } | undefined {
  // Byte for byte: UTF-8 in a name is opaque here and decoded once found, as busboy decodes it.
  const lines = block.toString("latin1").split("\r\n");
  let disposition: RegExpExecArray | null = null;
  let typed = false;
  for (const line of lines) {
    const found = DISPOSITION.exec(line);
    if (found) {
      if (disposition) return undefined;
      disposition = found;
    } else if (CONTENT_TYPE.test(line) && !typed) typed = true;
    else return undefined;
  }
  if (disposition === null) return undefined;
  const [, name, fileName] = disposition;
  // A text part with a Content-Type could name a charset busboy would decode it with.
  if (typed && fileName === undefined) return undefined;
  const utf8 = (latin1: string) => Buffer.from(latin1, "latin1").toString("utf8");
  return fileName === undefined ? { name: utf8(name!) } : { name: utf8(name!), fileName: utf8(fileName) };
}

function startsWith(bytes: Buffer, prefix: Buffer, at: number): boolean {
  return bytes.length >= at + prefix.length && bytes.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;
}
