/**
 * A tiny XML writer for S3 responses and a deliberately minimal reader for the two request bodies
 * Kura accepts (CompleteMultipartUpload, Delete). The reader only extracts text of known leaf elements:
 * no DTDs, no external entities, nothing that could expand or fetch.
 */

export const S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/";

/** An already-serialised XML fragment (distinct from text, which is escaped). */
export interface Xml {
  readonly xml: string;
}

export function escapeXml(text: string): string {
  return text.replace(/[&<>"'\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, (c) => {
    switch (c) {
      case "&":
        return "&amp;";
      case "<":
        return "&lt;";
      case ">":
        return "&gt;";
      case '"':
        return "&quot;";
      case "'":
        return "&apos;";
      default:
        return `&#${c.charCodeAt(0)};`;
    }
  });
}

type Child = Xml | string | number | boolean | undefined | null | Child[];

function render(child: Child): string {
  if (child === undefined || child === null) return "";
  if (Array.isArray(child)) return child.map(render).join("");
  if (typeof child === "object") return child.xml;
  return escapeXml(String(child));
}

/** `<name attrs>children</name>`; text children are escaped, arrays flattened, undefined skipped. */
export function el(name: string, children?: Child, attrs: Record<string, string> = {}): Xml {
  const a = Object.entries(attrs)
    .map(([k, v]) => ` ${k}="${escapeXml(v)}"`)
    .join("");
  const inner = render(children ?? "");
  return { xml: inner === "" ? `<${name}${a}></${name}>` : `<${name}${a}>${inner}</${name}>` };
}

export function xmlDocument(root: Xml): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${root.xml}`;
}

export function xmlResponse(root: Xml, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(xmlDocument(root), { status, headers: { "content-type": "application/xml", ...headers } });
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Decodes the five named entities and numeric references (Go writes `&#34;`, the SDK `&quot;`). */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-zA-Z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return safeCodePoint(parseInt(ref.slice(2), 16)) ?? whole;
    if (ref.startsWith("#")) return safeCodePoint(parseInt(ref.slice(1), 10)) ?? whole;
    return ENTITIES[ref] ?? whole;
  });
}

function safeCodePoint(n: number): string | undefined {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : undefined;
}

class MalformedXmlError extends Error {}

/** Bodies with a DOCTYPE or entity declarations are refused outright. */
function guard(body: string): string {
  if (/<!DOCTYPE|<!ENTITY/i.test(body)) throw new MalformedXmlError("DOCTYPE");
  return body.replace(/<\?xml[^>]*\?>/, "").replace(/<!--[\s\S]*?-->/g, "");
}

/** Every `<tag>…</tag>` block (namespace-prefix tolerant), innermost text not decoded. */
function blocks(body: string, tag: string): string[] {
  const re = new RegExp(`<(?:[A-Za-z0-9_-]+:)?${tag}(?:\\s[^>]*)?>([\\s\\S]*?)</(?:[A-Za-z0-9_-]+:)?${tag}>`, "g");
  return [...body.matchAll(re)].map((m) => m[1] as string);
}

function leaf(block: string, tag: string): string | undefined {
  const found = blocks(block, tag)[0];
  if (found === undefined) return undefined;
  if (found.includes("<")) {
    const cdata = /^\s*<!\[CDATA\[([\s\S]*)\]\]>\s*$/.exec(found);
    if (!cdata) throw new MalformedXmlError(tag);
    return cdata[1];
  }
  return decodeEntities(found);
}

export interface CompletedPart {
  partNumber: number;
  etag: string;
}

/** `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"…"</ETag></Part>…` → parts, or undefined if malformed. */
export function parseCompleteMultipart(body: string): CompletedPart[] | undefined {
  try {
    const text = guard(body);
    if (blocks(text, "CompleteMultipartUpload").length !== 1) return undefined;
    const parts: CompletedPart[] = [];
    for (const part of blocks(text, "Part")) {
      const n = leaf(part, "PartNumber")?.trim();
      const etag = leaf(part, "ETag")?.trim();
      if (!n || !/^\d{1,5}$/.test(n) || etag === undefined) return undefined;
      parts.push({ partNumber: Number(n), etag: etag.replace(/^"+|"+$/g, "") });
    }
    return parts.length ? parts : undefined;
  } catch {
    return undefined;
  }
}

/** `<Delete><Quiet>true</Quiet><Object><Key>…</Key></Object>…</Delete>` → keys, or undefined if malformed. */
export function parseDeleteObjects(body: string): { quiet: boolean; keys: string[] } | undefined {
  try {
    const text = guard(body);
    if (blocks(text, "Delete").length !== 1) return undefined;
    const keys: string[] = [];
    for (const object of blocks(text, "Object")) {
      const key = leaf(object, "Key");
      if (key === undefined || key === "") return undefined;
      keys.push(key);
    }
    if (keys.length === 0 || keys.length > 1000) return undefined;
    return { quiet: leaf(text, "Quiet")?.trim().toLowerCase() === "true", keys };
  } catch {
    return undefined;
  }
}
