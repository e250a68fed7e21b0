/**
 * Accept-Encoding as src/http/gzip-asset.ts reads it (RFC 9110 §12.5.3): gzip when listed with a
 * weight above 0, or, unlisted, under a `*` above 0; examples, then properties on random lists
 * (fast-check, fixed seed).
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { acceptsGzip } from "../../src/http/gzip-asset";

test("what browsers, curl and proxies send", () => {
  const cases: [string | null, boolean][] = [
    ["gzip, deflate, br, zstd", true], // Chromium
    ["gzip, deflate, br", true], // Firefox, Safari
    ["deflate, gzip", true], // curl --compressed
    ["GZIP", true],
    ["x-gzip", true],
    ["gzip;q=0.001", true],
    ["br;q=1.0, *;q=0.1", true],
    [" gzip ; q = 0.5 ", true],
    ["gzip;q=abc", true], // a malformed weight is the default 1
    [null, false],
    ["", false],
    ["identity", false],
    ["br", false],
    ["gzip;q=0", false],
    ["gzip;q=0.000", false],
    ["*;q=0", false],
    ["gzip;q=0, *", false], // named beats the wildcard
    ["gzipped", false],
  ];
  for (const [header, gz] of cases) expect({ header, gz: acceptsGzip(header) }).toEqual({ header, gz });
});

const token = fc.constantFrom("gzip", "x-gzip", "*", "br", "deflate", "identity", "zstd", "compress", "gz", "");
const weight = fc.option(fc.constantFrom("0", "0.0", "0.5", "1", "1.000", "abc", ""), { nil: undefined });
const member = fc.record({ token, weight, pad: fc.constantFrom("", " ", "  ") });
const list = fc.array(member, { maxLength: 6 });
const render = (ms: { token: string; weight: string | undefined; pad: string }[]) =>
  ms.map((m) => `${m.pad}${m.token}${m.weight === undefined ? "" : `${m.pad};${m.pad}q=${m.weight}`}${m.pad}`).join(",");
const OPTIONS = { seed: 20261129, numRuns: 500 };

test("property: any header is read without throwing; a leading gzip member decides; no gzip and no * is no gzip", () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 200 }), (header) => {
      expect(typeof acceptsGzip(header)).toBe("boolean");
    }),
    OPTIONS,
  );
  fc.assert(
    fc.property(list, (ms) => {
      const rest = render(ms);
      expect(acceptsGzip(`gzip, ${rest}`)).toBe(true);
      expect(acceptsGzip(`gzip;q=0, ${rest}`)).toBe(false);
      const named = ms.some((m) => ["gzip", "x-gzip", "*"].includes(m.token));
      if (!named) expect(acceptsGzip(rest)).toBe(false);
      // Case and the spaces around members and weights do not matter.
      expect(acceptsGzip(rest.toUpperCase().replaceAll("Q=", "q="))).toBe(acceptsGzip(rest.replaceAll(" ", "")));
    }),
    OPTIONS,
  );
});
