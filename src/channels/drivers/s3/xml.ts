/**
 * Just enough XML reading for S3 responses (ListObjectsV2 pages and error
 * bodies). S3 XML is flat and machine-generated: no CDATA, comments or
 * attributes we need, so element text plus entity decoding is all it takes.
 * Entity decoding matters: a key "a&b" arrives as "a&amp;b".
 */

const NAMED_ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

export function decodeXmlText(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (whole, name: string) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return Number.isFinite(code) && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[name] ?? whole;
  });
}

/**
 * Raw inner text of every `<tag>…</tag>` (and `<tag/>` as ""), in document order. Linear in the
 * input whatever a peer sends: an open tag without a close ends the search (none after it can
 * close either), and attribute text never runs past the next '<'.
 */
export function elements(xml: string, tag: string): string[] {
  const out: string[] = [];
  const open = new RegExp(`<${tag}(?:\\s[^<>]*?)?(/?)>`, "g");
  const close = new RegExp(`</${tag}\\s*>`, "g");
  for (let m = open.exec(xml); m; m = open.exec(xml)) {
    if (m[1]) {
      out.push("");
      continue;
    }
    close.lastIndex = open.lastIndex;
    const end = close.exec(xml);
    if (!end) break;
    out.push(xml.slice(open.lastIndex, end.index));
    open.lastIndex = close.lastIndex;
  }
  return out;
}

/** Decoded text of the first `<tag>`, or undefined. */
export function text(xml: string, tag: string): string | undefined {
  const first = elements(xml, tag)[0];
  return first === undefined ? undefined : decodeXmlText(first);
}

export interface ListPage {
  objects: { key: string; size: number; modified?: Date }[];
  truncated: boolean;
  nextToken?: string;
}

/** Why a list page is refused; the message is shown to admins (drain alert, channel `last_error`). */
export class ListPageError extends Error {
  constructor(why: string) {
    super(`S3 列表响应格式无效：${why}`);
    this.name = "ListPageError";
  }
}

const LIST_ROOT_OPEN = /^\uFEFF?\s*(?:<\?xml[^<>]*\?>\s*)?<ListBucketResult(?:\s[^<>]*)?>/;
const LIST_ROOT_CLOSE = /<\/ListBucketResult\s*>$/;
const CONTENTS_OPEN = /<Contents[\s/>]/g;

/**
 * One ListObjects page. Anything that is not a complete `ListBucketResult` is refused rather than
 * read as "no objects": a captive portal's HTML or a body cut off mid-way would otherwise make a
 * purge remove a channel whose objects remain, a health check pass, and reconciliation treat every
 * replica as missing.
 */
export function parseListPage(xml: string): ListPage {
  if (!LIST_ROOT_OPEN.test(xml)) throw new ListPageError("不是 ListBucketResult 文档");
  if (!LIST_ROOT_CLOSE.test(xml.trimEnd().slice(-64))) throw new ListPageError("文档不完整（缺少结束标签）");
  // With `encoding-type=url` S3 percent-encodes keys (space as '+') so that keys
  // with characters XML 1.0 cannot carry survive; servers that ignore the
  // parameter do not echo it back, and then keys are plain text.
  const urlEncoded = (text(xml, "EncodingType") ?? "").toLowerCase() === "url";
  const blocks = elements(xml, "Contents");
  // An opened but never closed entry would otherwise vanish from the page unnoticed.
  if (blocks.length !== (xml.match(CONTENTS_OPEN)?.length ?? 0)) throw new ListPageError("Contents 元素不完整");
  const objects = blocks.map((block) => {
    const rawKey = text(block, "Key") ?? "";
    if (!rawKey) throw new ListPageError("缺少 Key");
    const key = urlEncoded ? decodeKey(rawKey) : rawKey;
    const size = Number(text(block, "Size") ?? "NaN");
    if (!Number.isSafeInteger(size) || size < 0) throw new ListPageError("Size 无效");
    const modifiedText = text(block, "LastModified");
    const modified = modifiedText ? new Date(modifiedText) : undefined;
    return { key, size, modified: modified && !Number.isNaN(modified.getTime()) ? modified : undefined };
  });
  const truncated = (text(xml, "IsTruncated") ?? "false").trim();
  if (truncated !== "true" && truncated !== "false") throw new ListPageError("IsTruncated 无效");
  return { objects, truncated: truncated === "true", nextToken: text(xml, "NextContinuationToken") || undefined };
}

function decodeKey(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "));
  } catch {
    // decodeURIComponent's own message is English ("URI error").
    throw new ListPageError("Key 的 URL 编码无效");
  }
}
