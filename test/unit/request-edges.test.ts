// Pure parsers behind the HTTP edge fixes (audit .scratch/audit-http F6–F8, F10, F11), as
// fast-check properties with a fixed seed against oracles that work differently from the code.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parseRange } from "../../src/delivery/serve-image";
import { unhandledServerError } from "../../src/http/disk-full";
import { illFormedField, isSqlTime } from "../../src/http/body";
import { rawTarget } from "../../src/shared/url-target";
import { usableHost } from "../../src/http/request-info";
import { handoverTarget, restoreTarget } from "../../src/http/threads/handover";
import { HANDOVER_TARGET_HEADER } from "../../src/http/threads/protocol";
import { truncateText } from "../../src/shared/text";

const SEED = 20261128;
const RUNS = { seed: SEED, numRuns: 2000 };

describe("parseRange (RFC 9110 §14)", () => {
  const size = fc.integer({ min: 0, max: 1e12 });
  const digits = fc.oneof(fc.nat(), fc.bigInt({ min: 0n, max: 10n ** 30n })).map(String);

  test("a unit other than bytes is ignored, whatever follows it (§14.2 MUST)", () => {
    const unit = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/).filter((u) => u.toLowerCase() !== "bytes");
    fc.assert(
      fc.property(unit, fc.string({ maxLength: 30 }), size, (u, rest, n) => {
        expect(parseRange(`${u}=${rest}`, n)).toBeUndefined();
      }),
      RUNS,
    );
  });

  test("only a well-formed single range can be 416; anything else is a range or ignored", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), size, (spec, n) => {
        const r = parseRange(`bytes=${spec}`, n);
        if (!/^\d*-\d*$/.test(spec)) expect(r).toBeUndefined();
        if (r === "unsatisfiable") expect(spec).toMatch(/^\d*-\d*$/);
      }),
      RUNS,
    );
  });

  test("bytes=a-b: ignored when b < a, 416 when a is past the end, else the bytes from a to min(b, end)", () => {
    fc.assert(
      fc.property(digits, fc.option(digits), size, fc.constantFrom("bytes", "Bytes", "BYTES"), (a, b, n, unit) => {
        const first = BigInt(a);
        const last = b === null ? null : BigInt(b);
        const expected =
          last !== null && last < first
            ? undefined
            : first >= BigInt(n)
              ? "unsatisfiable"
              : { start: Number(first), end: Number(last === null || last >= BigInt(n) ? BigInt(n) - 1n : last) };
        expect(parseRange(`${unit}=${a}-${b ?? ""}`, n)).toEqual(expected);
      }),
      RUNS,
    );
  });

  test("bytes=-n: the last n bytes (all of a shorter body); 416 for n = 0 or an empty body", () => {
    fc.assert(
      fc.property(digits, size, (s, n) => {
        const suffix = BigInt(s);
        const expected = suffix === 0n || n === 0 ? "unsatisfiable" : { start: Number(suffix >= BigInt(n) ? 0n : BigInt(n) - suffix), end: n - 1 };
        expect(parseRange(`bytes=-${s}`, n)).toEqual(expected);
      }),
      RUNS,
    );
  });
});

describe("isSqlTime", () => {
  /** Calendar rules written out, without Date: the oracle. */
  const leap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const daysIn = (y: number, m: number) => [31, leap(y) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]!;
  const pad = (n: number, w: number) => String(n).padStart(w, "0");

  test("a formatted time is valid exactly when month, day, hour, minute and second exist", () => {
    const fields = fc.tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 14 }),
      fc.integer({ min: 0, max: 33 }),
      fc.integer({ min: 0, max: 25 }),
      fc.integer({ min: 0, max: 61 }),
      fc.integer({ min: 0, max: 61 }),
    );
    fc.assert(
      fc.property(fields, ([y, mo, d, h, mi, s]) => {
        const text = `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)} ${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}`;
        const real = mo >= 1 && mo <= 12 && d >= 1 && d <= daysIn(y, mo) && h < 24 && mi < 60 && s < 60;
        expect([text, isSqlTime(text)]).toEqual([text, real]);
      }),
      { seed: SEED, numRuns: 5000 },
    );
  });

  test("anything but the exact shape is refused", () => {
    for (const text of [
      "2020-01-01T00:00:00",
      "2020-01-01 00:00:00Z",
      "2020-1-01 00:00:00",
      " 2020-01-01 00:00:00",
      "+02020-01-01 00:00:00",
      "",
      "2020-01-01",
    ]) {
      expect([text, isSqlTime(text)]).toEqual([text, false]);
    }
  });
});

describe("illFormedField", () => {
  /** Strings of any UTF-16 code units, lone surrogates included, with surrogates made likely. */
  const units = fc.oneof(fc.integer({ min: 0xd800, max: 0xdfff }), fc.integer({ min: 0, max: 0xffff }), fc.constantFrom(0x61, 0x7a));
  const text = fc.array(units, { maxLength: 6 }).map((codes) => String.fromCharCode(...codes));
  const json = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: "small" }, text, fc.integer(), fc.boolean(), fc.constant(null), tie("array"), tie("object")),
    array: fc.array(tie("value"), { maxLength: 4 }),
    object: fc.dictionary(text, tie("value"), { maxKeys: 4 }),
  })).object;
  /** The oracle: encodeURIComponent refuses exactly the strings that are not well-formed. */
  const broken = (s: string) => {
    try {
      encodeURIComponent(s);
      return false;
    } catch {
      return true;
    }
  };
  const anyBroken = (v: unknown): boolean =>
    typeof v === "string"
      ? broken(v)
      : Array.isArray(v)
        ? v.some(anyBroken)
        : v !== null && typeof v === "object"
          ? Object.entries(v).some(([k, x]) => broken(k) || anyBroken(x))
          : false;

  test("finds a lone surrogate in any value or key at any depth, and only then", () => {
    fc.assert(
      fc.property(json, (body) => {
        const field = illFormedField(body);
        expect(field !== undefined).toBe(anyBroken(body));
        if (field !== undefined) expect(field.isWellFormed()).toBe(true);
      }),
      RUNS,
    );
  });

  test("names the top-level field, and survives nesting deeper than the stack", () => {
    expect(illFormedField({ ok: "a", tags: ["x", { deep: "\ud800" }] })).toBe("tags");
    let deep: unknown = "\udc00";
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(illFormedField({ nested: deep })).toBe("nested");
  });
});

describe("truncateText", () => {
  const piece = fc.constantFrom("a", "é", "e\u0301", "😀", "🇯🇵", "👩‍👩‍👧", "中", "\u0301");
  const text = fc.array(piece, { maxLength: 120 }).map((p) => p.join(""));
  const boundaries = (s: string) => new Set([...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(s)].map((g) => g.index + g.segment.length));

  test("the longest prefix of whole graphemes within max units: well-formed, never a split character", () => {
    fc.assert(
      fc.property(text, fc.integer({ min: 1, max: 300 }), (s, max) => {
        const cut = truncateText(s, max);
        expect(s.startsWith(cut)).toBe(true);
        expect(cut.length).toBeLessThanOrEqual(max);
        expect(cut.isWellFormed()).toBe(true);
        if (s.length <= max) return void expect(cut).toBe(s);
        const ends = [...boundaries(s)].filter((b) => b <= max);
        if (ends.length > 0) expect(cut.length).toBe(Math.max(...ends));
        else expect(cut.length).toBeGreaterThanOrEqual(max - 1);
      }),
      RUNS,
    );
  });
});

describe("Host and request targets", () => {
  test("usableHost: one RFC 3986 host with a port in range", () => {
    for (const host of ["img.example.com", "127.0.0.1:8080", "[::1]:80", "a", "a_b", "a:"]) expect([host, usableHost(host)]).toEqual([host, true]);
    for (const host of [null, "", "x y", 'x"y', "a:99999", "a%20b", "[::1", "a, b", "a/b", "a@b", "xn--a", "1.2.3.256", "é"]) {
      expect([host, usableHost(host)]).toEqual([host, false]);
    }
  });

  test("rawTarget reads a bare target (no usable Host) from its first character", () => {
    expect(rawTarget("/healthz")).toEqual({ path: "/healthz", query: "" });
    expect(rawTarget("//i/x?w=1")).toEqual({ path: "//i/x", query: "w=1" });
    expect(rawTarget("http://a//i/x?w=1")).toEqual({ path: "//i/x", query: "w=1" });
  });

  test("a handed-over target reaches the main thread as sent: carried when fetch would change it, restored there", () => {
    const segment = fc.constantFrom("", "i", "o", "x", "healthz", "%2F", "a#b");
    const target = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => `/${s.join("/")}`);
    fc.assert(
      fc.property(target, fc.constantFrom("http://127.0.0.1:8080", "http://img.example.com"), (path, origin) => {
        const { sent, carried } = handoverTarget(origin + path);
        // What the main thread's listener gives for the fetch that goes out (fetch keeps the Host, not the placeholder).
        const arrived = new Request(`${origin}${sent.startsWith("//") ? "/" : sent.split("#")[0]}`, {
          headers: carried === undefined ? {} : { [HANDOVER_TARGET_HEADER]: carried },
        });
        expect(carried === undefined).toBe(!path.startsWith("//") && !path.includes("#"));
        const restored = restoreTarget(arrived);
        expect(restored.url).toBe(new Request(origin + path).url);
        expect(restored.headers.has(HANDOVER_TARGET_HEADER)).toBe(false);
      }),
      RUNS,
    );
    // Without a usable Host the thread carries the raw target; the main thread normalizes it as its own listener does.
    const bare = handoverTarget("/i/../healthz");
    expect(bare).toEqual({ sent: "/", carried: encodeURIComponent("/i/../healthz") });
    const restored = restoreTarget(new Request("http://x/", { headers: { host: "", [HANDOVER_TARGET_HEADER]: bare.carried! } }));
    expect(rawTarget(restored.url).path).toBe("/healthz");
  });
});

describe("Bun.serve's error handler", () => {
  test("logs what escaped every handler, without query strings, and answers the 500 envelope", async () => {
    const lines: [string, Record<string, unknown> | undefined][] = [];
    const handler = unhandledServerError({ error: (msg, fields) => void lines.push([msg, fields]) });
    const res = handler(new TypeError('"/s3/k?X-Amz-Signature=secret&x=1" cannot be parsed as a URL.'));
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "服务器内部错误" });
    expect(lines).toHaveLength(1);
    expect(lines[0]![0]).toMatch(/[\u4e00-\u9fff]/);
    expect(String(lines[0]![1]!.err)).toContain("TypeError");
    expect(String(lines[0]![1]!.err)).toContain("/s3/k");
    expect(JSON.stringify(lines)).not.toContain("secret");
  });
});
