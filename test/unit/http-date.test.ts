/**
 * HTTP-date parsing (src/shared/http-date.ts, RFC 9110 5.6.7): the three forms a recipient accepts,
 * and nothing else. If-Modified-Since went through Date.parse, which reads "2030" as a date: a
 * 304 for bytes the client never had.
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { parseHttpDate } from "../../src/shared/http-date";

const SEED = 20261129;
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad = (n: number) => String(n).padStart(2, "0");
const clock = (d: Date) => `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
const rfc850 = (d: Date) => `${DAYS[d.getUTCDay()]}, ${pad(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${pad(d.getUTCFullYear() % 100)} ${clock(d)} GMT`;
const asctime = (d: Date) =>
  `${DAYS[d.getUTCDay()]!.slice(0, 3)} ${MONTHS[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, " ")} ${clock(d)} ${d.getUTCFullYear()}`;

test("the RFC's own example in all three forms", () => {
  const expected = Date.UTC(1994, 10, 6, 8, 49, 37);
  expect(parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT")).toBe(expected);
  expect(parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT")).toBe(expected);
  expect(parseHttpDate("Sun Nov  6 08:49:37 1994")).toBe(expected);
});

test("anything else is no date: what Date.parse accepts, wrong zones, impossible days and times", () => {
  for (const text of [
    "2030",
    "2030-01-01",
    "2030-01-01T00:00:00Z",
    "1",
    "garbage",
    "",
    "Sun, 06 Nov 1994 08:49:37 UTC",
    "Sun, 06 Nov 1994 08:49:37 +0000",
    "Sun, 6 Nov 1994 08:49:37 GMT",
    "sun, 06 nov 1994 08:49:37 GMT",
    "Sun, 31 Feb 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 24:00:00 GMT",
    "Sun, 06 Nov 1994 08:60:00 GMT",
    "Sun, 00 Nov 1994 08:49:37 GMT",
    "Sun, 06 Nov 1994 08:49:37 GMT junk",
  ]) {
    expect({ text, parsed: parseHttpDate(text) }).toEqual({ text, parsed: undefined });
  }
});

test("every moment round-trips through each form (to the second; RFC 850 within its century window)", () => {
  const now = new Date().getUTCFullYear();
  fc.assert(
    fc.property(fc.date({ min: new Date(Date.UTC(now - 49, 0, 1)), max: new Date(Date.UTC(now + 49, 11, 31)), noInvalidDate: true }), (d) => {
      const second = Math.floor(d.getTime() / 1000) * 1000;
      expect(parseHttpDate(d.toUTCString())).toBe(second);
      expect(parseHttpDate(rfc850(d))).toBe(second);
      expect(parseHttpDate(asctime(d))).toBe(second);
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

test("arbitrary text never throws, and a date it yields is a whole second", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        fc.date({ noInvalidDate: true }).map((d) => d.toUTCString().replace(/\d/g, (c) => String((Number(c) * 7) % 10))),
      ),
      (text) => {
        const parsed = parseHttpDate(text);
        if (parsed !== undefined) expect(Number.isInteger(parsed / 1000)).toBe(true);
      },
    ),
    { seed: SEED, numRuns: 5000 },
  );
});
