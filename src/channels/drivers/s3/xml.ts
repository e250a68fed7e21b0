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

/** Raw inner text of every `<tag>…</tag>` (and `<tag/>` as ""), in document order. */
export function elements(xml: string, tag: string): string[] {
  const out: string[] = [];
  const re = new RegExp(`<${tag}(?:\\s[^>]*)?(?:/>|>([\\s\\S]*?)</${tag}\\s*>)`, "g");
  for (const match of xml.matchAll(re)) out.push(match[1] ?? "");
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

export function parseListPage(xml: string): ListPage {
  // With `encoding-type=url` S3 percent-encodes keys (space as '+') so that keys
  // with characters XML 1.0 cannot carry survive; servers that ignore the
  // parameter do not echo it back, and then keys are plain text.
  const urlEncoded = (text(xml, "EncodingType") ?? "").toLowerCase() === "url";
  const objects = elements(xml, "Contents").map((block) => {
    const rawKey = text(block, "Key") ?? "";
    const key = urlEncoded ? decodeURIComponent(rawKey.replace(/\+/g, " ")) : rawKey;
    const size = Number(text(block, "Size") ?? "NaN");
    if (!Number.isSafeInteger(size) || size < 0) throw new Error("S3 列表响应格式无效 (Size)");
    const modifiedText = text(block, "LastModified");
    const modified = modifiedText ? new Date(modifiedText) : undefined;
    return { key, size, modified: modified && !Number.isNaN(modified.getTime()) ? modified : undefined };
  });
  return {
    objects,
    truncated: (text(xml, "IsTruncated") ?? "false").trim() === "true",
    nextToken: text(xml, "NextContinuationToken") || undefined,
  };
}
