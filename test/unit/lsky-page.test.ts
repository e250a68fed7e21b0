/**
 * The `links` window of Lsky's paginator against Laravel's UrlWindow (onEachSide 3): every page
 * below 14 pages; from 14 on, the first pages, the current one with 3 on each side and the last
 * two, "..." (null here) for each gap. Too many images to upload for the black-box test of
 * test/clients/lsky.test.ts, which covers the URLs, labels and page parsing.
 */
import { expect, test } from "bun:test";
import { laravelPage, lskyPage, pageWindow } from "../../src/compat/lsky-page";

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("below 14 pages every page is listed", () => {
  expect(pageWindow(1, 1)).toEqual([1]);
  expect(pageWindow(7, 13)).toEqual(range(1, 13));
});

test("from 14 pages: near the start, in the middle, near the end", () => {
  expect(pageWindow(1, 20)).toEqual([...range(1, 10), null, 19, 20]);
  expect(pageWindow(7, 20)).toEqual([...range(1, 10), null, 19, 20]);
  expect(pageWindow(8, 20)).toEqual([1, 2, null, ...range(5, 11), null, 19, 20]);
  expect(pageWindow(13, 20)).toEqual([1, 2, null, ...range(10, 16), null, 19, 20]);
  expect(pageWindow(14, 20)).toEqual([1, 2, null, ...range(11, 20)]);
  expect(pageWindow(20, 20)).toEqual([1, 2, null, ...range(11, 20)]);
  // Past the last page (Laravel still answers it, empty): the end of the range, nothing active.
  expect(pageWindow(50, 1000)).toEqual([1, 2, null, ...range(47, 53), null, 999, 1000]);
});

test("a page of many stays bounded and marks the gaps as Laravel does", () => {
  const page = lskyPage([], 100_000, 500, 40, "http://x/api/v1/images", [["keyword", "a b"]]);
  expect(page.links.length).toBe(2 + 13);
  expect(page.links.filter((l) => l.label === "...")).toEqual([
    { url: null, label: "...", active: false },
    { url: null, label: "...", active: false },
  ]);
  expect(page.links.find((l) => l.active)).toEqual({ url: "http://x/api/v1/images?keyword=a%20b&page=500", label: "500", active: true });
});

test("page parsing follows FILTER_VALIDATE_INT and falls back to 1", () => {
  for (const [text, page] of [
    ["3", 3],
    [" 3 ", 3],
    ["+3", 3],
    ["03", 1],
    ["0", 1],
    ["-3", 1],
    ["abc", 1],
    ["3abc", 1],
    ["1e3", 1],
    ["", 1],
    ["99999999999999999999", 1],
  ] as const) {
    expect([text, laravelPage(text)]).toEqual([text, page]);
  }
  expect(laravelPage(undefined)).toBe(1);
});
