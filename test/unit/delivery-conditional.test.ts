/**
 * If-None-Match parsing and Range parsing at their edges (written to kill the etag/range mutants that
 * `bun run mutate delivery` left): lists with commas inside quotes, tabs and junk, unquoted members,
 * weak tags, `*`, and every single-range form with its boundaries.
 */
import { expect, test } from "bun:test";
import { ifNoneMatchMatches, parseEntityTagList } from "../../src/delivery/etag.ts";
import { parseRange } from "../../src/delivery/serve-image.ts";

test("entity-tag lists split on commas outside quotes only", () => {
  const table: [string, string[]][] = [
    ['"a"', ['"a"']],
    [' "a" ,\t"b",,"c" ', ['"a"', '"b"', '"c"']],
    ['"a,b", W/"c"', ['"a,b"', 'W/"c"']],
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
  ];
  expect(table.map(([h]) => [h, parseRange(h, 100)])).toEqual(table);
});
