/**
 * The streaming readers behind Chevereto's urlencoded form (fast-check, fixed seeds): on random
 * bodies cut into random chunks, the urlencoded parser finds exactly the fields URLSearchParams
 * finds, and the base64 decoder accepts exactly what the whole-text check accepts, with the
 * bytes of `Buffer.from(text, "base64")`. Chunk edges fall anywhere: inside a `%XX` escape,
 * between `%` and its digits, inside a UTF-8 character, between a base64 group's characters.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { Base64Decoder } from "../../src/compat/base64-stream";
import { UrlencodedParser, utf8Decoder } from "../../src/compat/urlencoded-stream";

/** `bytes` cut at the given positions (taken modulo its length, so any list of numbers works). */
function cut(bytes: Uint8Array, at: number[]): Uint8Array[] {
  const edges = [...new Set(at.map((n) => (bytes.length ? n % (bytes.length + 1) : 0)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const edge of edges) {
    pieces.push(bytes.subarray(from, edge));
    from = edge;
  }
  pieces.push(bytes.subarray(from));
  return pieces;
}

/** Every field the parser reports, with its value decoded as URLSearchParams decodes it. */
function parse(pieces: Uint8Array[]): [string, string][] {
  const parser = new UrlencodedParser();
  const fields: [string, string][] = [];
  let decoder = utf8Decoder();
  let value = "";
  let name = "";
  const events = [...pieces.flatMap((p) => parser.push(p)), ...parser.end()];
  for (const e of events) {
    if (e.type === "field") {
      name = e.name;
      value = "";
      decoder = utf8Decoder();
    } else if (e.type === "value") value += decoder.decode(e.bytes, { stream: true });
    else fields.push([name, value + decoder.decode()]);
  }
  return fields;
}

/** Pieces of urlencoded text chosen to hit every rule: separators, `+`, good and broken escapes, a BOM, invalid UTF-8, multi-byte characters. */
const TOKENS = [
  "a",
  "key",
  "source",
  "=",
  "&",
  "+",
  "%",
  "%2",
  "%2B",
  "%2b",
  "%3D",
  "%26",
  "%25",
  "%G1",
  "%%41",
  "%4",
  "%E4%B8%AD",
  "%E4%B8",
  "%FF",
  "%C3",
  "%EF%BB%BF",
  "\uFEFF",
  "中",
  "é",
  "😀",
  " ",
  "0",
  "F",
  "f",
];

describe("streaming urlencoded parser", () => {
  test("finds the fields URLSearchParams finds, however the body is cut", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TOKENS), { maxLength: 60 }), fc.array(fc.nat(), { maxLength: 12 }), (tokens, at) => {
        const text = tokens.join("");
        const bytes = new TextEncoder().encode(text);
        expect(parse(cut(bytes, at))).toEqual([...new URLSearchParams(text)]);
      }),
      { seed: 20261127, numRuns: 5000 },
    );
  });

  test("decodes every %XY escape as URLSearchParams does, with any two ASCII characters after the %", () => {
    // Every hex digit (both cases) and the characters just outside each digit range ('/', ':', '@', 'G', '`', 'g').
    const edge = fc.constantFrom(..."0123456789abcdefABCDEF/:@G`g% ");
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom("a", "=", "&", ""), edge, edge), { maxLength: 20 }), fc.array(fc.nat(), { maxLength: 6 }), (parts, at) => {
        const text = parts.map(([before, x, y]) => `${before}%${x}${y}`).join("");
        expect(parse(cut(new TextEncoder().encode(text), at))).toEqual([...new URLSearchParams(text)]);
      }),
      { seed: 2611, numRuns: 3000 },
    );
  });

  test("and on arbitrary strings, one byte per chunk included", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 80 }), fc.boolean(), fc.array(fc.nat(), { maxLength: 8 }), (text, bytewise, at) => {
        const bytes = new TextEncoder().encode(text);
        const pieces = bytewise ? Array.from(bytes, (b) => Uint8Array.of(b)) : cut(bytes, at);
        expect(parse(pieces)).toEqual([...new URLSearchParams(text)]);
      }),
      { seed: 1127, numRuns: 3000 },
    );
  });

  test("a name longer than the limit is reported as too long, its value still delimited", () => {
    const parser = new UrlencodedParser(4);
    const events = [...parser.push(new TextEncoder().encode("abcdef=1&key=2")), ...parser.end()];
    expect(events.filter((e) => e.type === "field")).toEqual([
      { type: "field", name: "abcd", nameTooLong: true },
      { type: "field", name: "key", nameTooLong: false },
    ]);
  });
});

/** The whole-text rule of `cheveretoSource`, the reference the streaming decoder must match. */
function wholeText(text: string): Buffer | "invalid" {
  const t = text.replace(/\s+/g, "");
  if (!t || t.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(t)) return "invalid";
  return Buffer.from(t, "base64");
}

function streamed(pieces: string[]): Buffer | "invalid" {
  const decoder = new Base64Decoder();
  try {
    return Buffer.concat([...pieces.map((p) => decoder.push(p)), decoder.end()]);
  } catch {
    return "invalid";
  }
}

const B64_TOKENS = ["QUJD", "QQ", "Q", "+/", "AA", "=", "==", " ", "\n", "\r\n", "\u00a0", "\u2028", "-", "_", "*", "Zm9v", "YmFy", "YQ=="];

describe("streaming base64 decoder", () => {
  test("accepts what the whole-text check accepts, with the same bytes, however the text is cut", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...B64_TOKENS), { maxLength: 40 }), fc.array(fc.nat(), { maxLength: 10 }), (tokens, at) => {
        const text = tokens.join("");
        const edges = [...new Set(at.map((n) => n % (text.length + 1)))].sort((a, b) => a - b);
        const pieces: string[] = [];
        let from = 0;
        for (const edge of edges) {
          pieces.push(text.slice(from, edge));
          from = edge;
        }
        pieces.push(text.slice(from));
        expect(streamed(pieces)).toEqual(wholeText(text));
      }),
      { seed: 4096, numRuns: 5000 },
    );
  });

  test.each(["QQ=Q", "QQ=Q\n", "QUJD=QQ=", "Q=QQ", "QUJDQQ=A"])("data after padding (%p) is refused, in one piece or cut anywhere", (text) => {
    expect(wholeText(text)).toBe("invalid");
    for (let at = 0; at <= text.length; at++) expect(streamed([text.slice(0, at), text.slice(at)])).toBe("invalid");
  });

  test("round-trips random bytes, whatever the line breaks", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.nat({ max: 80 }), fc.array(fc.nat(), { maxLength: 10 }), (bytes, width, at) => {
        const b64 = Buffer.from(bytes).toString("base64");
        const text = width ? (b64.match(new RegExp(`.{1,${width}}`, "g")) ?? []).join("\r\n") : b64;
        const edges = [...new Set(at.map((n) => n % (text.length + 1)))].sort((a, b) => a - b);
        const pieces = [...edges, text.length].map((edge, i) => text.slice(i ? edges[i - 1] : 0, edge));
        expect(streamed(pieces)).toEqual(Buffer.from(bytes));
      }),
      { seed: 77, numRuns: 2000 },
    );
  });
});
