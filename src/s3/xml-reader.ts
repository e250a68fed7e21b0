/**
 * A small, strictly linear XML reader for the two request bodies Kura accepts (CompleteMultipartUpload,
 * Delete). One forward pass: every step either consumes input or fails, and every search (`indexOf`,
 * sticky regexes) starts at the cursor, so hostile input (256 KiB of `<!--`, unclosed quotes, deep
 * nesting) costs O(n) and is refused at its first defect. No DTDs, no entity declarations, nothing
 * that could expand or fetch: only the five predefined entities and numeric references are decoded.
 */

export class MalformedXmlError extends Error {}

export interface XmlNode {
  /** Local name (namespace prefix dropped). */
  name: string;
  children: XmlNode[];
  /** Decoded text directly inside the element (CDATA included). */
  text: string;
}

/** Larger bodies are refused before parsing; callers already cap the bytes read at the same size. */
export const MAX_XML_CHARS = 1024 * 1024;
const MAX_DEPTH = 16;
/** CompleteMultipartUpload with 10000 parts has 30001 elements. */
const MAX_ELEMENTS = 40_000;

const NAME = /[A-Za-z_][\w.:-]*/y;
const ATTRIBUTE = /\s+[A-Za-z_][\w.:-]*\s*=\s*(?:"[^"<]*"|'[^'<]*')/y;
const TAG_END = /\s*(\/?)>/y;
const CLOSE_END = /\s*>/y;
const WHITESPACE = /^[\s\uFEFF]*$/;

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Decodes the five named entities and numeric references (Go writes `&#34;`, the SDK `&quot;`). */
export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(#x[0-9a-fA-F]{1,6}|#\d{1,7}|[a-zA-Z]{2,4});/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return safeCodePoint(parseInt(ref.slice(2), 16)) ?? whole;
    if (ref.startsWith("#")) return safeCodePoint(parseInt(ref.slice(1), 10)) ?? whole;
    return ENTITIES[ref] ?? whole;
  });
}

function safeCodePoint(n: number): string | undefined {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : undefined;
}

const localName = (qname: string) => qname.slice(qname.indexOf(":") + 1);

/** Parses one document into its root element; throws MalformedXmlError on anything else. */
export function parseXml(body: string): XmlNode {
  if (body.length > MAX_XML_CHARS) throw new MalformedXmlError("too large");
  const fail = (why: string): never => {
    throw new MalformedXmlError(why);
  };
  let pos = 0;
  let elements = 0;
  let root: XmlNode | undefined;
  const stack: { qname: string; node: XmlNode }[] = [];

  const match = (re: RegExp): RegExpExecArray | null => {
    re.lastIndex = pos;
    const m = re.exec(body);
    if (m) pos = re.lastIndex;
    return m;
  };
  /** Skips to just after `end`, which must occur. */
  const skipPast = (end: string, why: string) => {
    const at = body.indexOf(end, pos);
    if (at < 0) fail(why);
    pos = at + end.length;
  };

  while (pos < body.length) {
    const lt = body.indexOf("<", pos);
    const textEnd = lt < 0 ? body.length : lt;
    if (textEnd > pos) {
      const text = body.slice(pos, textEnd);
      const top = stack.at(-1);
      if (top) top.node.text += decodeEntities(text);
      else if (!WHITESPACE.test(text)) fail("text outside the root element");
      pos = textEnd;
      continue;
    }
    // body[pos] === "<"
    if (body.startsWith("<!--", pos)) {
      pos += 4;
      skipPast("-->", "unclosed comment");
    } else if (body.startsWith("<?", pos)) {
      pos += 2;
      skipPast("?>", "unclosed processing instruction");
    } else if (body.startsWith("<![CDATA[", pos)) {
      const top = stack.at(-1) ?? fail("CDATA outside the root element");
      const start = pos + 9;
      pos = start;
      skipPast("]]>", "unclosed CDATA");
      top.node.text += body.slice(start, pos - 3);
    } else if (body.startsWith("<!", pos)) {
      fail("DOCTYPE and declarations are not accepted");
    } else if (body.startsWith("</", pos)) {
      pos += 2;
      const name = match(NAME)?.[0] ?? fail("bad closing tag");
      if (!match(CLOSE_END)) fail("bad closing tag");
      const open = stack.pop();
      if (!open || open.qname !== name) fail("mismatched closing tag");
    } else {
      pos += 1;
      const qname = match(NAME)?.[0] ?? fail("bad tag name");
      while (match(ATTRIBUTE));
      const end = match(TAG_END) ?? fail("bad tag");
      if (++elements > MAX_ELEMENTS) fail("too many elements");
      const node: XmlNode = { name: localName(qname), children: [], text: "" };
      const parent = stack.at(-1);
      if (parent) parent.node.children.push(node);
      else if (root) fail("more than one root element");
      else root = node;
      if (end[1] !== "/") {
        if (stack.length >= MAX_DEPTH) fail("nested too deeply");
        stack.push({ qname, node });
      }
    }
  }
  if (stack.length > 0 || !root) fail("unclosed element");
  return root!;
}

/** The text of the only child element `name` that has no element children, or undefined when absent. */
export function leafText(node: XmlNode, name: string): string | undefined {
  const found = node.children.filter((c) => c.name === name);
  if (found.length === 0) return undefined;
  if (found.length > 1 || found[0]!.children.length > 0) throw new MalformedXmlError(name);
  return found[0]!.text;
}
