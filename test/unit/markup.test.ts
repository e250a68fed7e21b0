/**
 * The one escaper for XML and HTML (fast-check, fixed seed): whatever the text, the escaped form
 * carries no markup character of its own, reads back to the same text as element content and as
 * a quoted attribute value (through the S3 XML reader), and a C0 control XML cannot carry becomes
 * a character reference instead of breaking the document.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { decodeEntities, parseXml } from "../../src/s3/xml-reader";
import { escapeMarkup } from "../../src/shared/markup";

// Markup characters, entity look-alikes and controls often; any other code point otherwise.
const markupOrAny = fc.oneof(
  fc.constantFrom("&", "<", ">", '"', "'", "&amp;", "&#1;", "\u0001", "\u001f", "\r", "\t"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
);

describe("escapeMarkup", () => {
  test("escaped text has no raw markup character and reads back unchanged", () => {
    fc.assert(
      fc.property(fc.string({ unit: markupOrAny, maxLength: 64 }), (text) => {
        const escaped = escapeMarkup(text);
        expect(escaped).not.toMatch(/[<>"']|&(?!(amp|lt|gt|quot|apos|#\d+);)/);
        expect(escaped).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/);
        expect(parseXml(`<a><b>${escaped}</b></a>`).children[0]?.text).toBe(text);
        expect(decodeEntities(escaped)).toBe(text);
      }),
      { seed: 20261128, numRuns: 2000 },
    );
  });

  test("the five characters and a control, by example", () => {
    expect(escapeMarkup(`a&b<c>"d'\u0001`)).toBe("a&amp;b&lt;c&gt;&quot;d&apos;&#1;");
    expect(escapeMarkup("截图 1.png\t\n")).toBe("截图 1.png\t\n");
  });
});
