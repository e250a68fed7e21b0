/**
 * A tiny XML writer for S3 responses and the readers of the two request bodies Kura accepts
 * (CompleteMultipartUpload, Delete), built on the linear tokenizer of xml-reader.ts.
 */
import { leafText, MalformedXmlError, parseXml, type XmlNode } from "./xml-reader";
import { escapeMarkup } from "../shared/markup";

export { decodeEntities } from "./xml-reader";

export const S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/";

/** An already-serialised XML fragment (distinct from text, which is escaped). */
export interface Xml {
  readonly xml: string;
}

type Child = Xml | string | number | boolean | undefined | null | Child[];

function render(child: Child): string {
  if (child === undefined || child === null) return "";
  if (Array.isArray(child)) return child.map(render).join("");
  if (typeof child === "object") return child.xml;
  return escapeMarkup(String(child));
}

/** `<name attrs>children</name>`; text children are escaped, arrays flattened, undefined skipped. */
export function el(name: string, children?: Child, attrs: Record<string, string> = {}): Xml {
  const a = Object.entries(attrs)
    .map(([k, v]) => ` ${k}="${escapeMarkup(v)}"`)
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

export interface CompletedPart {
  partNumber: number;
  etag: string;
}

/** Runs a reader over the parsed body; any defect (or a refused construct) is undefined = MalformedXML. */
function read<T>(body: string, rootName: string, extract: (root: XmlNode) => T | undefined): T | undefined {
  try {
    const root = parseXml(body);
    return root.name === rootName ? extract(root) : undefined;
  } catch (err) {
    if (err instanceof MalformedXmlError) return undefined;
    throw err;
  }
}

/** `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"…"</ETag></Part>…` → parts, or undefined if malformed. */
export function parseCompleteMultipart(body: string): CompletedPart[] | undefined {
  return read(body, "CompleteMultipartUpload", (root) => {
    const parts: CompletedPart[] = [];
    for (const part of root.children.filter((c) => c.name === "Part")) {
      const n = leafText(part, "PartNumber")?.trim();
      const etag = leafText(part, "ETag")?.trim();
      if (!n || !/^\d{1,5}$/.test(n) || etag === undefined) return undefined;
      parts.push({ partNumber: Number(n), etag: etag.replace(/^"+|"+$/g, "") });
    }
    return parts.length ? parts : undefined;
  });
}

/**
 * A per-object condition of DeleteObjects: `<ETag>` (AWS since 2025: delete only that version), or
 * `<LastModifiedTime>` / `<Size>`, which AWS honours on directory buckets only and Kura not at all
 * (`unsupported` names it, so that object is refused rather than deleted unconditionally).
 */
export interface DeleteCondition {
  etag?: string;
  unsupported?: string;
}

export interface DeleteRequest {
  quiet: boolean;
  keys: string[];
  /** Per key (same index), present only when some object carries a condition. */
  conditions?: (DeleteCondition | undefined)[];
}

/** The condition elements of one `<Object>`, undefined without any. */
function deleteCondition(object: XmlNode): DeleteCondition | undefined {
  const etag = leafText(object, "ETag")?.trim();
  const unsupported = ["LastModifiedTime", "Size"].find((name) => leafText(object, name) !== undefined);
  if (etag === undefined && unsupported === undefined) return undefined;
  return { ...(etag !== undefined && { etag }), ...(unsupported && { unsupported }) };
}

/** `<Delete><Quiet>true</Quiet><Object><Key>…</Key><ETag>…</ETag></Object>…</Delete>` → keys and their conditions, or undefined if malformed. */
export function parseDeleteObjects(body: string): DeleteRequest | undefined {
  return read(body, "Delete", (root) => {
    const keys: string[] = [];
    const conditions: (DeleteCondition | undefined)[] = [];
    for (const object of root.children.filter((c) => c.name === "Object")) {
      const key = leafText(object, "Key");
      if (key === undefined || key === "") return undefined;
      keys.push(key);
      conditions.push(deleteCondition(object));
    }
    if (keys.length === 0 || keys.length > 1000) return undefined;
    const quiet = leafText(root, "Quiet")?.trim().toLowerCase() === "true";
    return conditions.some((c) => c !== undefined) ? { quiet, keys, conditions } : { quiet, keys };
  });
}
