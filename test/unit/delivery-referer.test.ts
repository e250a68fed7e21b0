import { describe, expect, test } from "bun:test";
import { InvalidRefererPatternError, refererAllowed, validateRefererPattern } from "../../src/delivery/referer.ts";

describe("refererAllowed", () => {
  test("an empty allowlist turns protection off", () => {
    expect(refererAllowed("https://evil.test/", [], false)).toBe(true);
    expect(refererAllowed(null, [], false)).toBe(true);
  });

  const P = ["example.com", "*.cdn.example.org", "xn--fiqs8s.example", "10.0.0.5", "::1"];
  const table: Array<[string | null, boolean, boolean]> = [
    // referer, allowEmpty, expected
    ["https://example.com/page", false, true],
    ["http://EXAMPLE.com:8080/x?y=1", false, true], // case and port ignored
    ["https://example.com./", false, true], // trailing dot
    ["https://www.example.com/", false, false], // bare domain is exact
    ["https://badexample.com/", false, false],
    ["https://example.com.evil.test/", false, false],
    ["https://a.cdn.example.org/", false, true],
    ["https://a.b.cdn.example.org/", false, true],
    ["https://cdn.example.org/", false, false], // wildcard = subdomains only
    ["https://xcdn.example.org/", false, false],
    ["https://xn--fiqs8s.example/", false, true], // punycode host as-is
    ["https://中国.example/", false, true], // Unicode host compares in punycode
    ["http://10.0.0.5:3000/", false, true],
    ["http://[::1]:8080/", false, true],
    ["http://10.0.0.6/", false, false],
    [null, true, true],
    [null, false, false],
    ["", true, true],
    ["   ", false, false],
    ["not a url", true, false], // garbage is not "empty"
    ["example.com", true, false], // no scheme: unparseable
    ["about:blank", true, false],
    ["data:text/html,hi", true, false],
  ];
  for (const [referer, allowEmpty, expected] of table) {
    test(`${JSON.stringify(referer)} allowEmpty=${allowEmpty} → ${expected}`, () => {
      expect(refererAllowed(referer, P, allowEmpty)).toBe(expected);
    });
  }

  test("hand-edited patterns still match (case, trailing dot)", () => {
    expect(refererAllowed("https://a.example.net/", ["*.Example.NET."], false)).toBe(true);
  });
});

describe("validateRefererPattern", () => {
  const good: Array<[string, string]> = [
    ["example.com", "example.com"],
    ["  Example.COM. ", "example.com"],
    ["*.Example.com", "*.example.com"],
    ["中国.example", "xn--fiqs8s.example"],
    ["xn--fiqs8s.example", "xn--fiqs8s.example"],
    ["localhost", "localhost"],
    ["192.168.1.10", "192.168.1.10"],
    ["[::1]", "::1"],
    ["2001:DB8::1", "2001:db8::1"],
    ["my_host.example", "my_host.example"],
  ];
  for (const [input, normalized] of good) {
    test(`accepts ${JSON.stringify(input)} as ${normalized}`, () => expect(validateRefererPattern(input)).toBe(normalized));
  }

  const bad = [
    "",
    "   ",
    "*",
    "*.",
    "https://example.com",
    "example.com/path",
    "example.com?x",
    "example.com:8080",
    "[::1]:8080",
    "1.2.3.4:80",
    "exa mple.com",
    "user@example.com",
    "a.*.example.com",
    "*example.com",
    "**.example.com",
    "*.1.2.3.4",
    "example..com",
    "-bad.example",
    "ex%61mple.com",
  ];
  for (const input of bad) {
    test(`rejects ${JSON.stringify(input)}`, () => {
      expect(() => validateRefererPattern(input)).toThrow(InvalidRefererPatternError);
      try {
        validateRefererPattern(input);
      } catch (err) {
        expect((err as Error).message).toMatch(/[\u4e00-\u9fff]/);
      }
    });
  }
});
