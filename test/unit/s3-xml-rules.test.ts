/**
 * The S3 XML reader rule by rule (src/s3/xml-reader.ts): what it accepts and the tree it builds
 * (local names, attributes in both quotes, text and CDATA, comments and processing instructions,
 * whitespace and a BOM around the root), what it refuses and why (declarations, text or CDATA
 * outside the root, mismatched or stray closing tags, a second root, the size, element and depth
 * limits at their exact bounds), entity decoding at its bounds, and leafText.
 */
import { describe, expect, test } from "bun:test";
import { decodeEntities, leafText, MAX_XML_CHARS, MalformedXmlError, parseXml, type XmlNode } from "../../src/s3/xml-reader";

/** The tree as [name, text, children] for compact comparisons. */
type Shape = [string, string, Shape[]];
const shape = (n: XmlNode): Shape => [n.name, n.text, n.children.map(shape)];
/** The refusal's reason, or "ok". */
function verdict(body: string): string {
  try {
    parseXml(body);
    return "ok";
  } catch (err) {
    if (err instanceof MalformedXmlError) return err.message;
    throw err;
  }
}

describe("accepted documents", () => {
  test("elements, text and self-closing tags build the tree; namespace prefixes are dropped", () => {
    expect(shape(parseXml("<a><b>x</b><c/><d></d></a>"))).toEqual([
      "a",
      "",
      [
        ["b", "x", []],
        ["c", "", []],
        ["d", "", []],
      ],
    ]);
    expect(shape(parseXml('<s:Delete xmlns:s="urn:x"><s:Key>k</s:Key></s:Delete>'))).toEqual(["Delete", "", [["Key", "k", []]]]);
    // Text around children is gathered into the element's own text, in order.
    expect(shape(parseXml("<a>1<b/>2<c>3</c>4</a>"))).toEqual([
      "a",
      "124",
      [
        ["b", "", []],
        ["c", "3", []],
      ],
    ]);
  });

  test("attributes in either quote, with blanks around = and between, are read past; a < inside one is refused", () => {
    for (const tag of ['<a b="1">', "<a b='12'>", "<a b='x' c=\"y\">", '<a  b="1">', '<a b = "1">', '<a b="1"\n\tc="2" >', '<a b="x>y">']) {
      expect([tag, verdict(`${tag}</a>`)]).toEqual([tag, "ok"]);
    }
    for (const tag of ['<a b="1"c="2">', '<a b="<">', "<a b='<'>", '<a b="1>', "<a b=1>", '<a ="1">']) {
      expect([tag, verdict(`${tag}</a>`)]).toEqual([tag, "bad tag"]);
    }
  });

  test("whitespace and a byte-order mark may surround the root; comments and processing instructions anywhere", () => {
    expect(verdict("\uFEFF<a/>")).toBe("ok");
    expect(verdict("\n\n  <a/>\r\n\t")).toBe("ok");
    expect(verdict('<?xml version="1.0" encoding="UTF-8"?>\n<!-- before --><a><!-- inside <b> --><?pi x?><b/></a><!-- after -->')).toBe("ok");
    expect(shape(parseXml("<a>x<!-- c -->y</a>"))).toEqual(["a", "xy", []]);
  });

  test("CDATA is kept verbatim (no entity decoding) and joins the element's text", () => {
    expect(parseXml("<a>1<![CDATA[<b>&amp;]]>2</a>").text).toBe("1<b>&amp;2");
    expect(parseXml("<a><![CDATA[]]></a>").text).toBe("");
    expect(parseXml("<a><![CDATA[x]]]]><![CDATA[>y]]></a>").text).toBe("x]]>y");
  });
});

describe("refused documents", () => {
  test("declarations, stray text and CDATA outside the root", () => {
    expect(verdict('<!DOCTYPE a [<!ENTITY x "y">]><a/>')).toBe("DOCTYPE and declarations are not accepted");
    expect(verdict("<a><!ENTITY x></a>")).toBe("DOCTYPE and declarations are not accepted");
    expect(verdict("x<a/>")).toBe("text outside the root element");
    expect(verdict(" x <a/>")).toBe("text outside the root element");
    expect(verdict("<a/>x")).toBe("text outside the root element");
    expect(verdict("<![CDATA[x]]><a/>")).toBe("CDATA outside the root element");
  });

  test("unclosed comments, instructions, CDATA and elements; an empty document", () => {
    expect(verdict("<a><!-- never closed</a>")).toBe("unclosed comment");
    expect(verdict("<?xml version='1.0'<a/>")).toBe("unclosed processing instruction");
    expect(verdict("<a><![CDATA[x</a>")).toBe("unclosed CDATA");
    expect(verdict("<a><b></b>")).toBe("unclosed element");
    for (const empty of ["", "  ", "<!-- only a comment -->", "<?xml version='1.0'?>"]) expect(verdict(empty)).toBe("unclosed element");
  });

  test("closing tags: exact names (prefix included), blanks only before >, none without an open element", () => {
    expect(verdict("<a></a >")).toBe("ok");
    expect(verdict("<a></b>")).toBe("mismatched closing tag");
    expect(verdict("<s:a></a>")).toBe("mismatched closing tag");
    expect(verdict("<a><b></a></b>")).toBe("mismatched closing tag");
    expect(verdict("</a>")).toBe("mismatched closing tag");
    expect(verdict("<a></a x>")).toBe("bad closing tag");
    expect(verdict("<a></ a>")).toBe("bad closing tag");
    expect(verdict("<a>< b/></a>")).toBe("bad tag name");
    expect(verdict("<a/><b/>")).toBe("more than one root element");
  });

  test("the size, element and depth limits hold at their exact bounds", () => {
    const padded = (doc: string, length: number) => doc + " ".repeat(length - doc.length);
    expect(verdict(padded("<a/>", MAX_XML_CHARS))).toBe("ok");
    expect(verdict(padded("<a/>", MAX_XML_CHARS + 1))).toBe("too large");
    // 40,000 elements (a CompleteMultipartUpload of 10,000 parts has 30,001).
    expect(verdict(`<a>${"<b/>".repeat(39_999)}</a>`)).toBe("ok");
    expect(verdict(`<a>${"<b/>".repeat(40_000)}</a>`)).toBe("too many elements");
    // 16 open elements; a self-closing one below the deepest does not count as a level.
    const nested = (depth: number, inner = "") => `${"<e>".repeat(depth)}${inner}${"</e>".repeat(depth)}`;
    expect(verdict(nested(16))).toBe("ok");
    expect(verdict(nested(16, "<leaf/>"))).toBe("ok");
    expect(verdict(nested(17))).toBe("nested too deeply");
  });
});

describe("entities", () => {
  test("the five named entities and numeric references in range are decoded; anything else stays as written", () => {
    expect(decodeEntities("&amp;&lt;&gt;&quot;&apos;")).toBe("&<>\"'");
    expect(decodeEntities("&#65;&#x41;&#x1F600;&#X41;")).toBe("AA\u{1F600}&#X41;");
    expect(decodeEntities("&#x10FFFF;&#1114111;")).toBe("\u{10FFFF}\u{10FFFF}");
    expect(decodeEntities("&#x110000;&#1114112;&#x1234567;&#12345678;")).toBe("&#x110000;&#1114112;&#x1234567;&#12345678;");
    expect(decodeEntities("&nbsp;&x;&#x;&#;& amp;&amp")).toBe("&nbsp;&x;&#x;&#;& amp;&amp");
    expect(decodeEntities("plain text")).toBe("plain text");
    // Text is decoded once: an escaped entity stays an entity.
    expect(decodeEntities("&amp;lt;")).toBe("&lt;");
    expect(parseXml("<a>&lt;b&gt; &#34;x&#34;</a>").text).toBe('<b> "x"');
  });
});

describe("leafText", () => {
  test("the text of the one leaf child of that name; absent is undefined; two, or one with children, is malformed", () => {
    const doc = parseXml("<r><One>1</One><Two>a</Two><Two>b</Two><Nested><x/></Nested><Empty/></r>");
    expect(leafText(doc, "One")).toBe("1");
    expect(leafText(doc, "Empty")).toBe("");
    expect(leafText(doc, "Missing")).toBeUndefined();
    expect(() => leafText(doc, "Two")).toThrow(MalformedXmlError);
    expect(() => leafText(doc, "Nested")).toThrow(MalformedXmlError);
  });
});
