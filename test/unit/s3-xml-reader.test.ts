/**
 * The S3 XML reader on hostile and random input (fast-check, fixed seed): it never throws anything but
 * "malformed" (undefined), stays linear (1 MiB in well under 100 ms), and reads what real clients send.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parseCompleteMultipart, parseDeleteObjects } from "../../src/s3/xml";
import { MAX_XML_CHARS, MalformedXmlError, parseXml } from "../../src/s3/xml-reader";

const TOKENS = [
  "<",
  ">",
  "</",
  "/>",
  "<!--",
  "-->",
  "<?xml",
  "?>",
  "<![CDATA[",
  "]]>",
  "<!DOCTYPE",
  "&",
  "&#",
  "&amp;",
  "&#34;",
  "'",
  '"',
  "=",
  " ",
  "Delete",
  "Object",
  "Key",
  "Quiet",
  "CompleteMultipartUpload",
  "Part",
  "PartNumber",
  "ETag",
  "a:",
  "x",
  "1",
];

describe("S3 XML reader", () => {
  test("random token soups: only undefined or a result, never an exception", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TOKENS), { maxLength: 200 }), (parts) => {
        const body = parts.join("");
        const del = parseDeleteObjects(body);
        const done = parseCompleteMultipart(body);
        if (del) expect(del.keys.length).toBeGreaterThan(0);
        if (done) expect(done.length).toBeGreaterThan(0);
      }),
      { seed: 20261124, numRuns: 2000 },
    );
  });

  test("well-formed documents with arbitrary keys round-trip through escaping", () => {
    const escapeXml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ minLength: 1, maxLength: 40 }).filter((k) => !/[\u0000-\u001f\ud800-\udfff]/.test(k)),
          { minLength: 1, maxLength: 20 },
        ),
        fc.boolean(),
        (keys, quiet) => {
          const body = `<?xml version="1.0"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>${quiet}</Quiet>${keys
            .map((k) => `<Object><Key>${escapeXml(k)}</Key></Object>`)
            .join("")}</Delete>`;
          expect(parseDeleteObjects(body)).toEqual({ quiet, keys });
        },
      ),
      { seed: 7, numRuns: 500 },
    );
  });

  test("1 MiB of any single hostile token is refused in linear time", () => {
    for (const token of TOKENS) {
      const body = token.repeat(Math.floor(MAX_XML_CHARS / token.length));
      // Best of three: the rule is the parser's cost, not a GC pause on a loaded machine (quadratic would take seconds).
      let best = Infinity;
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        expect(parseDeleteObjects(body)).toBeUndefined();
        best = Math.min(best, performance.now() - started);
      }
      expect(best).toBeLessThan(100);
    }
    expect(() => parseXml("x".repeat(MAX_XML_CHARS + 1))).toThrow(MalformedXmlError);
  });
});
