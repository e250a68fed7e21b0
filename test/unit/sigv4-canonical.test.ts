/**
 * SigV4's canonical pieces rule by rule (src/s3/sigv4-canonical.ts): the URI candidates, the query's
 * parsing and canonical order, header values (trimming, duplicates, rclone's doubled
 * Content-Length), the date's exact shape and calendar, and the HMAC chain over UTF-8. The signed
 * requests of real clients (../shared/s3) are verified end to end in s3-sigv4.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { S3AuthError } from "../../src/s3/s3-auth-error";
import {
  canonicalHeaderValue,
  canonicalQuery,
  canonicalUriCandidates,
  deriveSigningKey,
  hmac,
  parseAmzDate,
  parseQuery,
  signHex,
} from "../../src/s3/sigv4-canonical";

describe("canonical URI", () => {
  test("an empty path is /; a strictly encoded path is its own only candidate; a loosely encoded one also gets its strict form; an undecodable one only itself", () => {
    expect(canonicalUriCandidates("")).toEqual(["/"]);
    expect(canonicalUriCandidates("/kura/a%20b.png")).toEqual(["/kura/a%20b.png"]);
    expect(canonicalUriCandidates("/kura/a!b(1).png")).toEqual(["/kura/a%21b%281%29.png", "/kura/a!b(1).png"]);
    expect(canonicalUriCandidates("/kura/%zz.png")).toEqual(["/kura/%zz.png"]);
    expect(canonicalUriCandidates("/kura/%e4%bd%a0.png")).toEqual(["/kura/%E4%BD%A0.png", "/kura/%e4%bd%a0.png"]);
  });
});

describe("query", () => {
  test("pairs in wire order: bare keys get empty values, only the first = splits, + is a space, empty parts are skipped", () => {
    expect(parseQuery("b=2&a&c=x=y&&d=%2B+e&=v&")).toEqual([
      ["b", "2"],
      ["a", ""],
      ["c", "x=y"],
      ["d", "+ e"],
      ["", "v"],
    ]);
    expect(parseQuery("")).toEqual([]);
  });

  test("an undecodable percent escape in a key or a value is InvalidURI", () => {
    for (const q of ["a=%zz", "%E4=1", "a=%"]) {
      let thrown: unknown;
      try {
        parseQuery(q);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(S3AuthError);
      expect([(thrown as S3AuthError).code, (thrown as S3AuthError).message]).toEqual(["InvalidURI", "请求地址中含有无效的百分号编码"]);
    }
  });

  test("canonical order is by encoded key, then by encoded value; values are strictly re-encoded; one name can be left out", () => {
    const pairs: [string, string][] = [
      ["b", "2"],
      ["a", "z"],
      ["a", "1"],
      ["a b", "x*y~"],
      ["A", ""],
      ["X-Amz-Signature", "s"],
    ];
    expect(canonicalQuery(pairs, "X-Amz-Signature")).toBe("A=&a=1&a=z&a%20b=x%2Ay~&b=2");
    expect(canonicalQuery(pairs)).toBe("A=&X-Amz-Signature=s&a=1&a=z&a%20b=x%2Ay~&b=2");
    // Already in order, and pairs equal in key and value, stay as they are.
    expect(
      canonicalQuery([
        ["k", "1"],
        ["k", "1"],
      ]),
    ).toBe("k=1&k=1");
  });
});

describe("header values", () => {
  test("trimmed, inner runs of blanks made one space, duplicates joined with a comma; an absent header is empty", () => {
    expect(canonicalHeaderValue("x-amz-meta-a", ["  a \t  b\n c  "])).toBe("a b c");
    expect(canonicalHeaderValue("x-amz-meta-a", ["1", " 2 "])).toBe("1,2");
    expect(canonicalHeaderValue("x-amz-meta-a", undefined)).toBe("");
    expect(canonicalHeaderValue("x-amz-meta-a", [""])).toBe("");
  });

  test("Content-Length sent twice with one value (rclone's presigned PUT) is signed once; different values are both kept", () => {
    expect(canonicalHeaderValue("content-length", ["287, 287"])).toBe("287");
    expect(canonicalHeaderValue("content-length", ["287", "287"])).toBe("287");
    expect(canonicalHeaderValue("content-length", ["287, 288"])).toBe("287, 288");
    expect(canonicalHeaderValue("content-length", ["287", "288"])).toBe("287,288");
    // Only Content-Length is collapsed.
    expect(canonicalHeaderValue("x-amz-meta-n", ["287, 287"])).toBe("287, 287");
  });
});

describe("dates and keys", () => {
  test("x-amz-date is YYYYMMDDTHHMMSSZ exactly, on a real calendar day and clock time", () => {
    expect(parseAmzDate("20261128T235959Z")).toBe(Date.parse("2026-11-28T23:59:59Z"));
    expect(parseAmzDate("20240229T000000Z")).toBe(Date.parse("2024-02-29T00:00:00Z"));
    for (const bad of [
      "20261128T240000Z",
      "20261128T236000Z",
      "20261128T235960Z",
      // Minutes and seconds of 60 that Date.UTC would carry into the same day's next hour or minute.
      "20261128T106000Z",
      "20261128T105960Z",
      "20250229T000000Z",
      "20261131T000000Z",
      "20261300T000000Z",
      "x20261128T000000Z",
      "20261128T000000Zx",
      "20261128T000000",
      "2026-11-28T00:00:00Z",
    ]) {
      expect([bad, parseAmzDate(bad)]).toEqual([bad, undefined]);
    }
  });

  test("the signing key chain and signatures are HMAC-SHA256 over UTF-8", () => {
    const h = (key: Buffer | string, data: string) => createHmac("sha256", key).update(Buffer.from(data, "utf8")).digest();
    expect(hmac("键", "数据").equals(h("键", "数据"))).toBe(true);
    const expected = h(h(h(h("AWS4秘密", "20261128"), "auto"), "s3"), "aws4_request");
    expect(deriveSigningKey("秘密", "20261128", "auto", "s3").equals(expected)).toBe(true);
    expect(signHex(expected, "策略")).toBe(createHmac("sha256", expected).update(Buffer.from("策略", "utf8")).digest("hex"));
  });
});
