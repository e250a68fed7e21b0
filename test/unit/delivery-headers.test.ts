import { describe, expect, test } from "bun:test";
import { ifNoneMatchMatches, originalEtag, parseEntityTagList, variantEtag } from "../../src/delivery/etag.ts";
import { cacheHeaders, httpDate } from "../../src/delivery/cache-headers.ts";

const SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

describe("ETags", () => {
  test("originals and variants have the spec's strong tags", () => {
    expect(originalEtag(SHA)).toBe(`"${SHA}"`);
    expect(variantEtag(SHA, 640, "webp", "p1")).toBe(`"${SHA}-640-webp-p1"`);
    expect(variantEtag(SHA, 0, "avif", "p1")).toBe(`"${SHA}-0-avif-p1"`);
  });

  const etag = variantEtag(SHA, 640, "webp", "p1");
  const table: Array<[string | null, boolean]> = [
    [null, false],
    ["", false],
    [etag, true],
    [`W/${etag}`, true], // weak comparison
    ["*", true],
    [` "a", ${etag} ,"b"`, true],
    [`"a",W/${etag}`, true],
    [`"${SHA}"`, false], // the original's tag is a different representation
    [`"${SHA}-640-jpeg-p1"`, false],
    [`"${SHA}-640-webp-p2"`, false], // another render profile: other bytes
    [`${SHA}-640-webp-p1`, true], // unquoted (broken client) still compared by value
    [`"x,${SHA}-640-webp-p1"`, false], // comma inside a quoted tag does not split it
    [`"a", "b"`, false],
  ];
  for (const [header, expected] of table) {
    test(`If-None-Match ${JSON.stringify(header)} → ${expected}`, () => expect(ifNoneMatchMatches(header, etag)).toBe(expected));
  }

  test("list parsing keeps commas inside quotes", () => {
    expect(parseEntityTagList(`"a,b", W/"c" ,"d"`)).toEqual([`"a,b"`, `W/"c"`, `"d"`]);
  });
});

describe("cache headers (spec 4.5 table)", () => {
  const up = Date.UTC(2024, 0, 2, 3, 4, 5);
  const o = originalEtag(SHA);
  const v = variantEtag(SHA, 320, "webp", "p1");

  test("original under /i/: immutable, ETag, Last-Modified, Vary when negotiated", () => {
    expect(cacheHeaders({ area: "i", kind: "original", etag: o, varyAccept: true, lastModified: up })).toEqual({
      "Cache-Control": "public, max-age=31536000, immutable",
      ETag: o,
      Vary: "Accept",
      "Last-Modified": "Tue, 02 Jan 2024 03:04:05 GMT",
    });
    expect(cacheHeaders({ area: "i", kind: "original", etag: o, varyAccept: false, lastModified: new Date(up) })).toEqual({
      "Cache-Control": "public, max-age=31536000, immutable",
      ETag: o,
      "Last-Modified": "Tue, 02 Jan 2024 03:04:05 GMT",
    });
  });

  test("variant under /i/: same Cache-Control, variant ETag, no Last-Modified", () => {
    expect(cacheHeaders({ area: "i", kind: "variant", etag: v, varyAccept: true, lastModified: up })).toEqual({
      "Cache-Control": "public, max-age=31536000, immutable",
      ETag: v,
      Vary: "Accept",
    });
    expect(cacheHeaders({ area: "i", kind: "variant", etag: v })).toEqual({ "Cache-Control": "public, max-age=31536000, immutable", ETag: v });
  });

  test("original or variant under /o/: public, no-cache", () => {
    expect(cacheHeaders({ area: "o", kind: "original", etag: o, varyAccept: true, lastModified: up })).toEqual({
      "Cache-Control": "public, no-cache",
      ETag: o,
      Vary: "Accept",
      "Last-Modified": "Tue, 02 Jan 2024 03:04:05 GMT",
    });
    expect(cacheHeaders({ area: "o", kind: "variant", etag: v })).toEqual({ "Cache-Control": "public, no-cache", ETag: v });
  });

  test("thumb: the same headers as /i/ (spec 4.4: headers as in 4.5)", () => {
    expect(cacheHeaders({ area: "thumb", kind: "variant", etag: v, varyAccept: true })).toEqual({
      "Cache-Control": "public, max-age=31536000, immutable",
      ETag: v,
      Vary: "Accept",
    });
  });

  for (const area of ["i", "o", "thumb"] as const) {
    test(`${area}: fallback after failed processing and 302 are no-store without ETag/Vary`, () => {
      expect(cacheHeaders({ area, kind: "fallback", etag: o, varyAccept: true, lastModified: up })).toEqual({ "Cache-Control": "no-store" });
      expect(cacheHeaders({ area, kind: "redirect", etag: o, varyAccept: true })).toEqual({ "Cache-Control": "no-store" });
    });
    test(`${area}: errors carry no cache headers`, () => {
      expect(cacheHeaders({ area, kind: "error", etag: o, varyAccept: true })).toEqual({});
    });
  }

  test("304 reuses the 200's input and so its Cache-Control, ETag and Vary", () => {
    const input = { area: "i" as const, kind: "variant" as const, etag: v, varyAccept: true };
    const ok = cacheHeaders(input);
    const notModified = cacheHeaders(input);
    expect(notModified["Cache-Control"]).toBe(ok["Cache-Control"]!);
    expect(notModified.ETag).toBe(v);
    expect(notModified.Vary).toBe("Accept");
  });

  test("an original/variant without ETag is a programming error", () => {
    expect(() => cacheHeaders({ area: "i", kind: "original" })).toThrow();
  });

  test("httpDate is the IMF-fixdate form", () => {
    expect(httpDate(Date.UTC(1994, 10, 6, 8, 49, 37))).toBe("Sun, 06 Nov 1994 08:49:37 GMT");
  });
});
