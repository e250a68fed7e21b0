import { describe, expect, test } from "bun:test";
import { InvalidParamsError, parseDeliveryParams, parseDeliveryQuery } from "../../src/delivery/params.ts";
import { acceptsWebp, chooseRepresentation, formatToMime, mimeToFormat } from "../../src/delivery/negotiate.ts";
import { httpErrorOf } from "../../src/http/errors.ts";

const S = { process_widths: [320, 640, 1280], process_formats: ["webp", "jpeg", "png", "avif"] };
const q = (s: string) => new URLSearchParams(s);

describe("parseDeliveryParams", () => {
  const ok: Array<[string, number | null, string | null]> = [
    ["", null, null],
    ["w=640", 640, null],
    ["format=webp", null, "webp"],
    ["format=auto", null, null],
    ["format=AVIF", null, "avif"],
    ["w=320&format=jpeg", 320, "jpeg"],
    ["w=640&w=99", 640, null], // first value wins
    ["x=1&utm_source=foo&v=2", null, null], // others ignored
  ];
  for (const [query, width, format] of ok) {
    test(`accepts "${query}"`, () => {
      expect(parseDeliveryParams(q(query), S)).toEqual({ width, format });
    });
  }

  const bad = ["w=641", "w=abc", "w=-640", "w=640.0", "w=1e3", "w=", "w=+640", "format=gif", "format=bmp", "format=", "w=99&w=640"];
  for (const query of bad) {
    test(`rejects "${query}" with a 400 in Chinese`, () => {
      let caught: unknown;
      try {
        parseDeliveryParams(q(query), S);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(InvalidParamsError);
      // The domain error carries no status; the HTTP surface maps it to 400.
      expect(httpErrorOf(caught as InvalidParamsError).status).toBe(400);
      expect((caught as Error).message).toMatch(/[\u4e00-\u9fff]/);
    });
  }

  test("w is refused when resizing is disabled (null or empty list)", () => {
    expect(() => parseDeliveryParams(q("w=640"), { ...S, process_widths: null })).toThrow(InvalidParamsError);
    expect(() => parseDeliveryParams(q("w=640"), { ...S, process_widths: [] })).toThrow(InvalidParamsError);
    expect(parseDeliveryParams(q("format=png"), { ...S, process_widths: null })).toEqual({ width: null, format: "png" });
  });

  test("format=auto stays valid with no formats enabled; a named one does not", () => {
    const none = { ...S, process_formats: [] };
    expect(parseDeliveryParams(q("format=auto"), none)).toEqual({ width: null, format: null });
    expect(() => parseDeliveryParams(q("format=webp"), none)).toThrow(InvalidParamsError);
  });
});

describe("acceptsWebp", () => {
  const table: Array<[string | null, boolean]> = [
    [null, false],
    ["", false],
    ["image/webp", true],
    ["image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", true], // Chrome
    ["IMAGE/WEBP;Q=0.5", true],
    ["image/webp;q=0", false],
    ["image/webp; q=0.000, image/*", false],
    ["image/webp;q=0.001", true],
    ["image/*", false],
    ["*/*", false],
    ["image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5", false], // old Safari
    ["image/webpx, text/html", false],
    ["image/webp;q=", true], // malformed weight = default
  ];
  for (const [accept, expected] of table) {
    test(`${JSON.stringify(accept)} → ${expected}`, () => expect(acceptsWebp(accept)).toBe(expected));
  }
});

describe("chooseRepresentation", () => {
  const ALL = ["webp", "jpeg", "png", "avif", "gif"];
  const NO_WEBP = ["jpeg", "png"];
  const WEBP = "image/avif,image/webp,*/*;q=0.8";
  type Row = [string, string, { width: number | null; format: string | null }, string | null, string[], object];
  const rows: Row[] = [
    [
      "jpeg + webp Accept → webp variant",
      "image/jpeg",
      { width: null, format: null },
      WEBP,
      ALL,
      { kind: "variant", width: 0, format: "webp", varyAccept: true },
    ],
    [
      "png + webp Accept → webp variant",
      "image/png",
      { width: null, format: null },
      WEBP,
      ALL,
      { kind: "variant", width: 0, format: "webp", varyAccept: true },
    ],
    ["jpeg, Accept lacks webp → original, still Vary", "image/jpeg", { width: null, format: null }, "image/*,*/*", ALL, { kind: "original", varyAccept: true }],
    ["jpeg, webp;q=0 → original, Vary", "image/jpeg", { width: null, format: null }, "image/webp;q=0,*/*", ALL, { kind: "original", varyAccept: true }],
    ["jpeg, no Accept → original, Vary", "image/jpeg", { width: null, format: null }, null, ALL, { kind: "original", varyAccept: true }],
    ["jpeg, webp disabled → original, no Vary", "image/jpeg", { width: null, format: null }, WEBP, NO_WEBP, { kind: "original", varyAccept: false }],
    ["gif is never negotiated", "image/gif", { width: null, format: null }, WEBP, ALL, { kind: "original", varyAccept: false }],
    ["webp stored → original", "image/webp", { width: null, format: null }, WEBP, ALL, { kind: "original", varyAccept: false }],
    ["avif stored → original", "image/avif", { width: null, format: null }, WEBP, ALL, { kind: "original", varyAccept: false }],
    [
      "jpeg + w + webp Accept → resized webp",
      "image/jpeg",
      { width: 640, format: null },
      WEBP,
      ALL,
      { kind: "variant", width: 640, format: "webp", varyAccept: true },
    ],
    [
      "jpeg + w, no webp → resized jpeg, Vary",
      "image/jpeg",
      { width: 640, format: null },
      "*/*",
      ALL,
      { kind: "variant", width: 640, format: "jpeg", varyAccept: true },
    ],
    [
      "gif + w → resized gif (animation kept), no Vary",
      "image/gif",
      { width: 320, format: null },
      WEBP,
      ALL,
      { kind: "variant", width: 320, format: "gif", varyAccept: false },
    ],
    ["webp + w → resized webp", "image/webp", { width: 320, format: null }, null, ALL, { kind: "variant", width: 320, format: "webp", varyAccept: false }],
    ["explicit format = stored, no w → original", "image/jpeg", { width: null, format: "jpeg" }, WEBP, ALL, { kind: "original", varyAccept: false }],
    [
      "explicit format = stored + w → variant",
      "image/jpeg",
      { width: 320, format: "jpeg" },
      WEBP,
      ALL,
      { kind: "variant", width: 320, format: "jpeg", varyAccept: false },
    ],
    [
      "explicit avif on jpeg → variant, no Vary",
      "image/jpeg",
      { width: null, format: "avif" },
      WEBP,
      ALL,
      { kind: "variant", width: 0, format: "avif", varyAccept: false },
    ],
    ["explicit png on gif + w", "image/gif", { width: 320, format: "png" }, null, ALL, { kind: "variant", width: 320, format: "png", varyAccept: false }],
    [
      "explicit webp without webp in Accept is honoured",
      "image/png",
      { width: null, format: "webp" },
      "image/png",
      ALL,
      { kind: "variant", width: 0, format: "webp", varyAccept: false },
    ],
  ];
  for (const [name, mime, params, accept, formats, expected] of rows) {
    test(name, () => expect(chooseRepresentation({ mime, width: 4000, height: 3000 }, params, accept, formats)).toEqual(expected as never));
  }

  test("format names and MIME types map both ways", () => {
    for (const f of ["webp", "jpeg", "png", "avif", "gif"] as const) expect(mimeToFormat(formatToMime(f))).toBe(f);
    expect(mimeToFormat("image/jpg")).toBe("jpeg");
    expect(mimeToFormat("IMAGE/PNG; charset=binary")).toBe("png");
    expect(mimeToFormat("image/bmp")).toBeNull();
  });
});

describe("parseDeliveryQuery (raw query, the /i/ fast path)", () => {
  const outcome = (run: () => unknown) => {
    try {
      return { ok: run() };
    } catch (err) {
      return { error: (err as Error).message };
    }
  };
  const same = (query: string) =>
    expect({ query, ...outcome(() => parseDeliveryQuery(query, S)) }).toEqual({ query, ...outcome(() => parseDeliveryParams(new URLSearchParams(query), S)) });

  test("reads exactly what URLSearchParams reads", () => {
    const cases = [
      "",
      "w=640",
      "w=640&format=webp",
      "format=png&w=320",
      "&&w=640&",
      "w",
      "w=",
      "w==640",
      "w=640=",
      "format",
      "format=webp=x",
      "W=640",
      "w=640&w=99",
      "w=99&w=640",
      "x=1&w=320",
      "w=6%340",
      "w=640&format=%77ebp",
      "w=+640",
      "w=640+",
      "format=web+p",
      "w%3D640",
      "a=%ZZ&w=640",
      "format=auto&w=1280",
      "w=12345678",
    ];
    for (const q of cases) same(q);
  });

  test("random queries from a small alphabet agree with URLSearchParams", () => {
    const alphabet = ["w", "=", "&", "6", "4", "0", "3", "2", "format", "webp", "png", "+", "%3", "%", "x", "auto"];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 3000; i++) {
      const len = 1 + Math.floor(next() * 10);
      same(Array.from({ length: len }, () => alphabet[Math.floor(next() * alphabet.length)]).join(""));
    }
  });
});
