/**
 * If-None-Match parsing and Range parsing at their edges (written to kill the etag/range mutants that
 * `bun run mutate delivery` left): lists with commas inside quotes, tabs and junk, unquoted members,
 * weak tags, `*`, every single-range form with its boundaries, and the two validators of originals
 * (If-Range's strong comparison or exact date, If-Modified-Since under If-None-Match's precedence).
 */
import { expect, test } from "bun:test";
import { ifNoneMatchMatches, ifRangeAllows, notModifiedSince, parseEntityTagList } from "../../src/delivery/etag.ts";
import { parseRange } from "../../src/delivery/serve-image.ts";

test("entity-tag lists split on commas outside quotes only", () => {
  const table: [string, string[]][] = [
    ['"a"', ['"a"']],
    [' "a" ,\t"b",,"c" ', ['"a"', '"b"', '"c"']],
    ['"a,b", W/"c"', ['"a,b"', 'W/"c"']],
    ['W/"a,b", "c"', ['W/"a,b"', '"c"']],
    ['"a"junk, "b"', ['"a"', '"b"']],
    ['"open', ['"open']],
    ["plain, W/weak ,x", ["plain", "W/weak", "x"]],
    ["W/", ["W/"]],
    [", ,\t", []],
    ["", []],
  ];
  expect(table.map(([h]) => [h, parseEntityTagList(h)])).toEqual(table);
});

test("If-None-Match uses the weak comparison and honours *", () => {
  const tag = '"abc"';
  const table: [string | null, boolean][] = [
    [null, false],
    ["", false],
    ["*", true],
    [" * ", true],
    ['"x", *', true],
    ['"abc"', true],
    ['W/"abc"', true],
    ["abc", true],
    ["W/abc", true],
    ['"ab"', false],
    ['"abcd"', false],
    ['"x", "abc"', true],
    ['"x","y"', false],
    ['"a"bc"', false],
    ['"', false],
    // Only a tag quoted at both ends loses its quotes: half-quoted text is compared as written.
    ['xabc"', false],
    ['"abcx', false],
  ];
  expect(table.map(([h]) => [h, ifNoneMatchMatches(h, tag)])).toEqual(table);
  expect(ifNoneMatchMatches('"a"', '"a"')).toBe(true);
  expect(ifNoneMatchMatches('W/"a"', 'W/"a"')).toBe(true);
  expect(ifNoneMatchMatches('"', '"')).toBe(true);
});

test("single byte ranges: forms, clamping, 416 only when unsatisfiable, anything else ignored (RFC 9110 §14.2)", () => {
  const table: [string | null, ReturnType<typeof parseRange>][] = [
    [null, undefined],
    ["", undefined],
    ["bytes=0-0", { start: 0, end: 0 }],
    ["bytes=0-99", { start: 0, end: 99 }],
    [" bytes=5-9 ", { start: 5, end: 9 }],
    ["bytes=90-", { start: 90, end: 99 }],
    ["bytes=99-", { start: 99, end: 99 }],
    ["bytes=100-", "unsatisfiable"],
    ["bytes=50-1000", { start: 50, end: 99 }],
    ["bytes=-1", { start: 99, end: 99 }],
    ["bytes=-100", { start: 0, end: 99 }],
    ["bytes=-500", { start: 0, end: 99 }],
    ["bytes=-0", "unsatisfiable"],
    ["bytes=9-5", undefined],
    ["bytes=-", undefined],
    ["bytes=a-b", undefined],
    ["items=0-1", undefined],
    ["lines=1-2", undefined],
    ["Bytes=0-1", { start: 0, end: 1 }],
    ["bytes=99999999999999999999-", "unsatisfiable"],
    ["bytes=0-1, 5-6", undefined],
    ["bytes=0-1,", undefined],
    // The whole value is the range: nothing may come before the unit.
    ["xbytes=0-1", undefined],
    ["other=1, bytes=0-1", undefined],
    // Leading zeros are no magnitude: 0009 is below 10, 09 is the 9 it says.
    ["bytes=10-0009", undefined],
    ["bytes=0005-09", { start: 5, end: 9 }],
  ];
  expect(table.map(([h]) => [h, parseRange(h, 100)])).toEqual(table);
});

test("If-Range: a strong tag must be the current one, a weak tag never matches, else the exact Last-Modified (RFC 9110 §13.1.5)", () => {
  const etag = '"abc"';
  const date = "Tue, 24 Nov 2026 10:00:00 GMT";
  const table: [string | null | undefined, string | undefined, boolean][] = [
    [null, date, true],
    [undefined, date, true],
    ["", date, true],
    ['"abc"', date, true],
    [' "abc" ', date, true],
    ['"abd"', date, false],
    ['"abc"x', date, false],
    ['W/"abc"', date, false],
    ["W/abc", date, false],
    [date, date, true],
    [` ${date} `, date, true],
    ["Tue, 24 Nov 2026 10:00:01 GMT", date, false],
    // The same instant written another way is no exact match: If-Range compares the text.
    ["Tuesday, 24-Nov-26 10:00:00 GMT", date, false],
    [date, undefined, false],
    ["abc", undefined, false],
  ];
  expect(table.map(([h, lm]) => [h, lm, ifRangeAllows(h, etag, lm)])).toEqual(table);
});

test("If-Modified-Since: 304 when unchanged since that date, ignored under If-None-Match or when unreadable (RFC 9110 §13.1.3)", () => {
  const lastModified = "Tue, 24 Nov 2026 10:00:00 GMT";
  const table: [string | null, string | null, boolean][] = [
    [null, null, false],
    [null, "", false],
    [null, lastModified, true],
    [null, "Tue, 24 Nov 2026 10:00:01 GMT", true],
    [null, "Tue, 24 Nov 2026 09:59:59 GMT", false],
    [null, "Wed, 01 Jan 2031 00:00:00 GMT", true],
    [null, "yesterday", false],
    // If-None-Match takes precedence, even an empty or non-matching one: the date is not looked at.
    ['"other"', lastModified, false],
    ["", lastModified, false],
  ];
  expect(table.map(([inm, ims]) => [inm, ims, notModifiedSince(inm, ims, lastModified)])).toEqual(table);
});
