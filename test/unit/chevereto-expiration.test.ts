/**
 * Chevereto V4's `expiration` parameter as a lifetime (src/compat/chevereto-expiration.ts), rule by
 * rule and as a property: whole seconds or an ISO-8601 duration as PHP's DateInterval reads it,
 * calendar months and years added the way PHP's DateTime::add does (31 January plus a month is
 * 3 March), Chevereto's offered choices taken as they are, anything else clamped to 5 minutes …
 * 1 year, and everything unreadable refused with a Chinese 400 instead of Chevereto's silent
 * 5 minutes. The black-box uploads are in clients/chevereto.test.ts.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { cheveretoExpirationSeconds } from "../../src/compat/chevereto-expiration";
import { Invalid } from "../../src/errors";
import { expectContained, fuzzParams, hostileString } from "../fuzz/fuzz-support";

const MIN = 300;
const MAX = 31_536_000;
const DAY = 86_400;
const at = (iso: string) => Date.parse(iso);
const JAN_1_2026 = at("2026-01-01T00:00:00Z");
const refusal = (value: string) => {
  try {
    return cheveretoExpirationSeconds(value, JAN_1_2026);
  } catch (err) {
    return err instanceof Invalid ? "Invalid" : err;
  }
};

describe("whole seconds", () => {
  test("absent, blank or zero is no expiration (the defaults apply)", () => {
    for (const value of [undefined, "", "   ", "0", "000", " 0 "]) expect(cheveretoExpirationSeconds(value, JAN_1_2026)).toBeUndefined();
  });

  test("clamped to 5 minutes … 1 year", () => {
    expect(["1", "299", "300", "301", "86400", "31535999", "31536000", "31536001", "99999999999999999999"].map(refusal)).toEqual([
      MIN,
      MIN,
      300,
      301,
      86_400,
      31_535_999,
      MAX,
      MAX,
      MAX,
    ]);
  });
});

describe("ISO-8601 durations", () => {
  test("Chevereto's offered choices, in either case and with blanks around, taken as they are", () => {
    expect(["PT5M", "pt15m", " PT30M ", "PT1H", "PT3H", "PT6H", "PT12H"].map(refusal)).toEqual([300, 900, 1800, 3600, 10_800, 21_600, 43_200]);
    expect(["P1D", "P2D", "P3D", "P4D", "P5D", "P6D", "P1W", "P2W", "P3W"].map(refusal)).toEqual([1, 2, 3, 4, 5, 6, 7, 14, 21].map((d) => d * DAY));
    // Calendar months from 1 January 2026: 31, 59, 90, 120, 151, 181 days; a year of 365.
    expect(["P1M", "P2M", "P3M", "P4M", "P5M", "P6M", "P1Y"].map(refusal)).toEqual([31, 59, 90, 120, 151, 181, 365].map((d) => d * DAY));
  });

  test("an offered year from a leap year's January is 366 days, past the clamp: offered choices are not clamped", () => {
    expect(cheveretoExpirationSeconds("P1Y", at("2028-01-01T00:00:00Z"))).toBe(366 * DAY);
    // The same 366 days written another way is no offered choice: clamped.
    expect(cheveretoExpirationSeconds("P366D", at("2028-01-01T00:00:00Z"))).toBe(MAX);
  });

  test("months overflow as PHP's DateTime::add does: 31 January plus a month is 3 March (2 March in a leap year)", () => {
    expect(cheveretoExpirationSeconds("P1M", at("2026-01-31T12:00:00Z"))).toBe(31 * DAY);
    expect(cheveretoExpirationSeconds("P1M", at("2028-01-31T12:00:00Z"))).toBe(31 * DAY);
    expect(cheveretoExpirationSeconds("P1M", at("2026-02-01T00:00:00Z"))).toBe(28 * DAY);
  });

  test("not offered: combined parts add up, then the clamp applies", () => {
    expect(["P1W2D", "P1DT1H", "PT1H30M", "PT90S", "PT1M", "P2Y", "P13M", "P1Y1D", "PT0S", "P0D"].map(refusal)).toEqual([
      9 * DAY,
      DAY + 3600,
      5400,
      MIN,
      MIN,
      MAX,
      MAX,
      MAX,
      MIN,
      MIN,
    ]);
  });

  test("a duration past what a Date holds is the longest choice", () => {
    expect(refusal("P99999999999Y")).toBe(MAX);
  });

  test("anything else is refused, never read as 5 minutes", () => {
    for (const value of [
      "P",
      "PT",
      "P1",
      "PT5",
      "P1DT",
      "P1.5D",
      "P-1D",
      "-P1D",
      "P1H",
      "PT1D",
      "P1M1Y",
      "P1D1W",
      "5m",
      "1e3",
      "0x10",
      "+300",
      "P 1D",
      "PT5M5M",
    ]) {
      expect([value, refusal(value)]).toEqual([value, "Invalid"]);
    }
    expect(() => cheveretoExpirationSeconds("P1.5D")).toThrow("expiration 必须是 ISO-8601 时长（如 PT5M、PT1H、P3D、P1W、P1M、P1Y）或整数秒");
  });
});

describe("as a property", () => {
  /** An independent reading: the parts' lengths in seconds, months and years counted on the UTC calendar from `now`. */
  function expected(parts: { y?: number; mo?: number; w?: number; d?: number; h?: number; mi?: number; s?: number }, now: number): number {
    const start = new Date(now);
    const end = Date.UTC(
      start.getUTCFullYear() + (parts.y ?? 0),
      start.getUTCMonth() + (parts.mo ?? 0),
      start.getUTCDate() + 7 * (parts.w ?? 0) + (parts.d ?? 0),
      start.getUTCHours(),
      start.getUTCMinutes(),
      start.getUTCSeconds(),
      start.getUTCMilliseconds(),
    );
    return Math.ceil((end - now) / 1000) + 3600 * (parts.h ?? 0) + 60 * (parts.mi ?? 0) + (parts.s ?? 0);
  }
  const part = fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined });
  const parts = fc.record({ y: part, mo: part, w: part, d: part, h: part, mi: part, s: part });
  const when = fc.integer({ min: at("2000-01-01T00:00:00Z"), max: at("2100-01-01T00:00:00Z") });

  test("every duration written from parts is read as their length on the calendar, clamped unless offered", () => {
    fc.assert(
      fc.property(parts, when, (p, now) => {
        const time = [p.h !== undefined ? `${p.h}H` : "", p.mi !== undefined ? `${p.mi}M` : "", p.s !== undefined ? `${p.s}S` : ""].join("");
        const date = [
          p.y !== undefined ? `${p.y}Y` : "",
          p.mo !== undefined ? `${p.mo}M` : "",
          p.w !== undefined ? `${p.w}W` : "",
          p.d !== undefined ? `${p.d}D` : "",
        ].join("");
        const text = `P${date}${time ? `T${time}` : ""}`;
        if (text === "P") return;
        const seconds = expected(p, now);
        const offered = /^(PT(5|15|30)M|PT(1|3|6|12)H|P[1-6]D|P[1-3]W|P[1-6]M|P1Y)$/.test(text);
        expect(cheveretoExpirationSeconds(text, now)).toBe(offered ? seconds : Math.min(MAX, Math.max(MIN, seconds)));
      }),
      fuzzParams(10),
    );
  });

  test("any text: no expiration, a lifetime within the bounds (an offered year may reach 366 days), or the Chinese 400", () => {
    fc.assert(
      fc.property(fc.oneof(hostileString, fc.stringMatching(/^\s?[PpTt0-9YMWDHS]{0,12}\s?$/)), when, (text, now) => {
        const seconds = expectContained(
          () => cheveretoExpirationSeconds(text, now),
          (err) => err instanceof Invalid,
        );
        if (seconds === undefined) return;
        expect(Number.isInteger(seconds)).toBe(true);
        expect(seconds).toBeGreaterThanOrEqual(MIN);
        expect(seconds).toBeLessThanOrEqual(366 * DAY);
      }),
      fuzzParams(10),
    );
  });
});
