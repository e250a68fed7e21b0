/**
 * A small namespace-aware XML reader, enough for WebDAV multistatus answers.
 * Servers differ in prefixes (`D:`, `d:`, `lp1:`, a default xmlns, none at all),
 * so elements are matched by (namespace URI, local name), never by prefix.
 * No DTDs, no external entities: only the five predefined ones and char refs.
 */
export interface XmlElement {
  ns: string;
  local: string;
  children: XmlElement[];
  /** Concatenated character data directly inside this element (entities decoded). */
  text: string;
}

export class XmlSyntaxError extends Error {
  constructor(reason: string) {
    super(`WebDAV 响应不是有效的 XML: ${reason}`);
    this.name = "XmlSyntaxError";
  }
}

const NAME = /[^\s/>=]+/y;
const ATTRIBUTE = /\s*([^\s=/>]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/y;
const PREDEFINED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

export function decodeEntities(raw: string): string {
  return raw.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[A-Za-z]+);/g, (whole, ref: string) => {
    if (ref[0] === "#") {
      const code = ref[1] === "x" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return PREDEFINED[ref] ?? whole;
  });
}

interface Frame {
  element: XmlElement;
  qname: string;
  scope: Map<string, string>;
}

/** Parses `xml` and returns its root element. */
export function parseXml(xml: string): XmlElement {
  const stack: Frame[] = [];
  let root: XmlElement | null = null;
  let i = 0;
  const skipPast = (marker: string, what: string): void => {
    const end = xml.indexOf(marker, i);
    if (end < 0) throw new XmlSyntaxError(`${what}未结束`);
    i = end + marker.length;
  };
  while (i < xml.length) {
    const lt = xml.indexOf("<", i);
    const textEnd = lt < 0 ? xml.length : lt;
    if (textEnd > i) {
      const top = stack.at(-1);
      if (top) top.element.text += decodeEntities(xml.slice(i, textEnd));
      i = textEnd;
      continue;
    }
    if (xml.startsWith("<?", i)) skipPast("?>", "处理指令");
    else if (xml.startsWith("<!--", i)) skipPast("-->", "注释");
    else if (xml.startsWith("<![CDATA[", i)) {
      const end = xml.indexOf("]]>", i);
      if (end < 0) throw new XmlSyntaxError("CDATA 未结束");
      const top = stack.at(-1);
      if (top) top.element.text += xml.slice(i + 9, end);
      i = end + 3;
    } else if (xml.startsWith("<!", i)) {
      // DOCTYPE: skipped, including an internal subset in [...]. Its entities are not honoured.
      const bracket = xml.indexOf("[", i);
      const close = xml.indexOf(">", i);
      if (bracket >= 0 && bracket < close) {
        i = bracket;
        skipPast("]", "DOCTYPE");
      }
      skipPast(">", "DOCTYPE");
    } else if (xml.startsWith("</", i)) {
      NAME.lastIndex = i + 2;
      const name = NAME.exec(xml)?.[0];
      const frame = stack.pop();
      if (!name || !frame || frame.qname !== name) throw new XmlSyntaxError(`结束标签不匹配: ${name ?? ""}`);
      i = NAME.lastIndex;
      skipPast(">", "结束标签");
    } else {
      i = openTag(xml, i + 1, stack, (element) => {
        if (root) throw new XmlSyntaxError("存在多个根元素");
        root = element;
      });
    }
  }
  if (stack.length > 0) throw new XmlSyntaxError(`元素未闭合: ${stack.at(-1)!.qname}`);
  if (!root) throw new XmlSyntaxError("没有根元素");
  return root;
}

/** Reads one start tag at `at` (just past '<'); returns the index after it. */
function openTag(xml: string, at: number, stack: Frame[], setRoot: (e: XmlElement) => void): number {
  NAME.lastIndex = at;
  const qname = NAME.exec(xml)?.[0];
  if (!qname) throw new XmlSyntaxError("标签名无效");
  let i = NAME.lastIndex;
  const attributes: [string, string][] = [];
  for (;;) {
    ATTRIBUTE.lastIndex = i;
    const m = ATTRIBUTE.exec(xml);
    if (!m) break;
    attributes.push([m[1], decodeEntities(m[2] ?? m[3] ?? "")]);
    i = ATTRIBUTE.lastIndex;
  }
  while (i < xml.length && /\s/.test(xml[i])) i++;
  const selfClosing = xml.startsWith("/>", i);
  if (!selfClosing && xml[i] !== ">") throw new XmlSyntaxError(`标签格式错误: ${qname}`);
  i += selfClosing ? 2 : 1;

  const parent = stack.at(-1);
  let scope = parent?.scope ?? new Map<string, string>();
  const declared = attributes.filter(([name]) => name === "xmlns" || name.startsWith("xmlns:"));
  if (declared.length > 0) {
    scope = new Map(scope);
    for (const [name, value] of declared) scope.set(name === "xmlns" ? "" : name.slice(6), value);
  }
  const colon = qname.indexOf(":");
  const prefix = colon >= 0 ? qname.slice(0, colon) : "";
  const ns = scope.get(prefix);
  if (ns === undefined && prefix !== "") throw new XmlSyntaxError(`未声明的命名空间前缀: ${prefix}`);
  const element: XmlElement = { ns: ns ?? "", local: qname.slice(colon + 1), children: [], text: "" };
  if (parent) parent.element.children.push(element);
  else setRoot(element);
  if (!selfClosing) stack.push({ element, qname, scope });
  return i;
}

export function child(element: XmlElement, ns: string, local: string): XmlElement | undefined {
  return element.children.find((c) => c.ns === ns && c.local === local);
}

export function childrenOf(element: XmlElement, ns: string, local: string): XmlElement[] {
  return element.children.filter((c) => c.ns === ns && c.local === local);
}
