/**
 * The SSRF building blocks at their edges (written to kill the mutants `bun run mutate ssrf` left):
 * address-set parsing and matching, the IPv6 forms that carry an IPv4 host, network boundaries,
 * the Chinese refusal messages of the URL importer, and the 200-byte file-name cut.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CidrSyntaxError, LOOPBACK_AND_PRIVATE, normalizeAddress, parseAddressSet } from "../../src/net/cidr.ts";
import { isPublicAddress, refusalReason } from "../../src/net/public-address.ts";
import { sanitizeFileName, type UrlImportError, type FetchToFileOptions } from "../../src/net/safe-fetch.ts";
import { importRefusal } from "../helpers/url-import";

describe("address sets", () => {
  test("normalizing strips brackets, zone ids, surrounding space and the IPv4-mapped prefix only when whole", () => {
    expect(normalizeAddress(" [fe80::1%eth0] ")).toBe("fe80::1");
    expect(normalizeAddress("fe80::1%25")).toBe("fe80::1");
    expect(normalizeAddress("::FFFF:10.1.2.3")).toBe("10.1.2.3");
    expect(normalizeAddress("[::1")).toBe("[::1");
    expect(normalizeAddress("::1]")).toBe("::1]");
    expect(normalizeAddress("x::ffff:10.1.2.3")).toBe("x::ffff:10.1.2.3");
    expect(normalizeAddress("::ffff:10.1.2.3x")).toBe("::ffff:10.1.2.3x");
    expect(normalizeAddress("::ffff:100.200.30.40")).toBe("100.200.30.40");
    expect(normalizeAddress("%zone")).toBe("");
  });

  test("entries, single addresses, networks, mapped and bracketed forms", () => {
    const set = parseAddressSet(" 10.0.0.0/8, , 192.168.1.7 ,::1, fd00::/8, [2001:db8::5]");
    expect(set.entries).toEqual(["10.0.0.0/8", "192.168.1.7", "::1", "fd00::/8", "[2001:db8::5]"]);
    for (const yes of ["10.255.255.255", "::ffff:10.0.0.1", "192.168.1.7", "[::1]", "fd12::1", "2001:db8::5", " 10.1.1.1 "])
      expect([yes, set.has(yes)]).toEqual([yes, true]);
    for (const no of ["11.0.0.0", "192.168.1.8", "::2", "fe00::1", "2001:db8::6", "not-an-ip", ""]) expect([no, set.has(no)]).toEqual([no, false]);
    expect(parseAddressSet("").entries).toEqual([]);
    expect(parseAddressSet("").has("127.0.0.1")).toBe(false);
  });

  test("syntax errors name the item", () => {
    for (const bad of ["10.0.0.0/8/1", "300.1.1.1", "10.0.0.0/33", "::/129", "10.0.0.0/x", "10.0.0.0/", "10.0.0.0/8x", "10.0.0.0/ 8", "host.example"]) {
      expect(() => parseAddressSet(`127.0.0.1, ${bad}`)).toThrow(CidrSyntaxError);
      expect(() => parseAddressSet(bad)).toThrow(bad);
    }
    expect(() => parseAddressSet("10.0.0.0/33")).toThrow("无效的网段前缀");
    expect(() => parseAddressSet("1.2.3")).toThrow("无效的地址或网段");
    expect(parseAddressSet("10.0.0.0/32, ::/128, 0.0.0.0/0").entries).toHaveLength(3);
  });

  test("the loopback-and-private default covers exactly its networks", () => {
    const set = parseAddressSet(LOOPBACK_AND_PRIVATE);
    for (const yes of ["127.0.0.1", "127.255.255.254", "::1", "10.0.0.1", "172.16.0.0", "172.31.255.255", "192.168.255.1", "fc00::1", "fdff::1"])
      expect([yes, set.has(yes)]).toEqual([yes, true]);
    for (const no of ["128.0.0.1", "172.15.255.255", "172.32.0.0", "192.169.0.1", "11.0.0.1", "fe80::1", "::2"]) expect([no, set.has(no)]).toEqual([no, false]);
  });
});

describe("public addresses", () => {
  test("IPv4 boundaries and reasons", () => {
    const table: [string, string | null][] = [
      ["0.255.255.255", "unspecified"],
      ["1.0.0.0", null],
      ["126.255.255.255", null],
      ["127.0.0.1", "loopback"],
      ["128.0.0.0", null],
      ["9.255.255.255", null],
      ["10.0.0.0", "private"],
      ["11.0.0.0", null],
      ["172.15.255.255", null],
      ["172.16.0.0", "private"],
      ["172.31.255.255", "private"],
      ["172.32.0.0", null],
      ["192.168.0.0", "private"],
      ["192.169.0.0", null],
      ["169.254.0.1", "link-local"],
      ["169.255.0.1", null],
      ["100.63.255.255", null],
      ["100.64.0.0", "shared"],
      ["100.127.255.255", "shared"],
      ["100.128.0.0", null],
      ["223.255.255.255", null],
      ["224.0.0.1", "multicast"],
      ["239.255.255.255", "multicast"],
      ["240.0.0.1", "reserved"],
      ["255.255.255.255", "reserved"],
      ["192.0.2.1", "documentation"],
      ["198.51.100.1", "documentation"],
      ["203.0.113.1", "documentation"],
      ["192.0.0.8", "reserved"],
      ["192.88.99.1", "reserved"],
      ["198.18.0.1", "reserved"],
      ["198.19.255.255", "reserved"],
      ["198.20.0.0", null],
      ["8.8.8.8", null],
    ];
    expect(table.map(([ip]) => [ip, refusalReason(ip)])).toEqual(table);
  });

  test("IPv6, including every form that carries an IPv4 host", () => {
    const table: [string, string | null][] = [
      ["::", "unspecified"],
      ["::1", "loopback"],
      ["0:0:0:0:0:0:0:1", "loopback"],
      ["::2", "unspecified"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["::ffff:8.8.8.8", null],
      ["[::ffff:10.0.0.1]", "private"],
      ["::ffff:0:127.0.0.1", "loopback"],
      ["::ffff:0:8.8.8.8", null],
      ["::127.0.0.1", "loopback"],
      ["::10.0.0.1", "private"],
      ["::0.0.1.1", "unspecified"],
      ["64:ff9b::10.0.0.1", "private"],
      ["64:ff9b::8.8.8.8", null],
      ["64:ff9b:1::8.8.8.8", "reserved"],
      ["2002:7f00:1::", "loopback"],
      ["2002:808:808::1", null],
      ["2002:a00:1::", "private"],
      ["fc00::1", "unique-local"],
      ["fdff:ffff::1", "unique-local"],
      ["fe80::1", "link-local"],
      ["fe80::1%eth0", "link-local"],
      ["febf::1", "link-local"],
      ["fec0::1", "reserved"],
      ["ff02::1", "multicast"],
      ["FF0E::1", "multicast"],
      ["2001:db8::1", "documentation"],
      ["3fff::1", "documentation"],
      ["2001::1", "reserved"],
      ["2001:1ff::1", "reserved"],
      ["2001:200::1", null],
      ["5f00::1", "reserved"],
      ["1::", "reserved"],
      ["4000::1", "reserved"],
      ["2606:4700:4700::1111", null],
      ["2a00:1450:4001:80b::200e", null],
      ["3ffe::1", null],
      ["1:2:3:4:5:6:7:8", "reserved"],
      ["not-an-ip", "invalid"],
      ["1.2.3", "invalid"],
      ["", "invalid"],
    ];
    expect(table.map(([ip]) => [ip, refusalReason(ip)])).toEqual(table);
    expect(isPublicAddress("8.8.8.8")).toBe(true);
    expect(isPublicAddress("10.0.0.1")).toBe(false);
  });
});

describe("URL import refusals carry their Chinese message", () => {
  let dir: string;
  let upstream: ReturnType<typeof Bun.serve>;
  const allow = parseAddressSet("127.0.0.1/32");
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "kura-ssrf-rules-"));
    upstream = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const p = new URL(req.url).pathname;
        if (p === "/loop") return Response.redirect("/loop", 302);
        if (p === "/nowhere") return new Response(null, { status: 302 });
        if (p === "/bad-location") return new Response(null, { status: 302, headers: { location: "ftp://x/y" } });
        if (p === "/big") return new Response(new Uint8Array(100), { headers: { "content-length": "100" } });
        if (p === "/ok.png") return new Response(new Uint8Array(10));
        return new Response("no", { status: 404 });
      },
    });
  });
  afterAll(() => {
    upstream.stop(true);
    rmSync(dir, { recursive: true, force: true });
  });

  let n = 0;
  const refusal = (url: string, opts: Partial<FetchToFileOptions> = {}) => importRefusal(url, join(dir, `f${++n}`), { maxBytes: 50, allow, ...opts });
  const base = () => `http://127.0.0.1:${upstream.port}`;

  test("each refusal kind has its status, code and message", async () => {
    const cases: [Promise<UrlImportError>, number, string, string][] = [
      [refusal("ftp://127.0.0.1/a.png"), 400, "bad_url", "URL 无效，只支持 http 或 https 地址"],
      [refusal("not a url"), 400, "bad_url", "URL 无效，只支持 http 或 https 地址"],
      [refusal(`http://u:p@127.0.0.1:${upstream.port}/ok.png`), 400, "bad_url", "URL 不能包含用户名或密码"],
      [refusal(`${base()}/bad-location`), 400, "bad_url", "上游返回了无效的重定向地址"],
      [refusal(`${base()}/nowhere`), 400, "bad_url", "上游返回了无效的重定向地址"],
      [refusal("http://10.0.0.1/a.png", { allow: undefined }), 400, "refused_address", "URL 指向的不是公网地址，已拒绝"],
      [refusal("http://name.invalid/a.png", { resolve: async () => [] }), 400, "dns_failed", "无法解析 URL 中的主机名"],
      [refusal("http://name.invalid/a.png", { resolve: async () => ["not-ip"] }), 400, "dns_failed", "无法解析 URL 中的主机名"],
      [
        refusal("http://name.invalid/a.png", {
          resolve: async () => {
            throw new Error("ENOTFOUND");
          },
        }),
        400,
        "dns_failed",
        "无法解析 URL 中的主机名",
      ],
      [refusal(`${base()}/loop`, { maxRedirects: 2 }), 400, "too_many_redirects", "重定向次数过多（最多 2 次）"],
      [refusal(`${base()}/missing`), 400, "upstream_status", "上游服务器返回了状态码 404"],
      [refusal(`${base()}/big`), 413, "too_large", "文件超过上传大小上限"],
      [refusal("http://127.0.0.1:1/a.png"), 400, "network", "无法从该 URL 下载文件"],
      [refusal(`${base()}/ok.png`, { signal: AbortSignal.abort() }), 400, "aborted", "下载已取消"],
    ];
    for (const [pending, status, code, message] of cases) {
      const err = await pending;
      expect([err.status as number, err.code as string, err.message]).toEqual([status, code, message]);
    }
  });
});

describe("file names", () => {
  test("the cut keeps whole characters within 200 bytes and the extension", () => {
    const ascii = sanitizeFileName(`${"a".repeat(250)}.jpeg`)!;
    expect(ascii).toBe(`${"a".repeat(195)}.jpeg`);
    const wide = sanitizeFileName(`${"图".repeat(100)}.png`)!; // 3 bytes each
    expect(wide).toBe(`${"图".repeat(65)}.png`);
    expect(new TextEncoder().encode(wide).length).toBe(199);
    expect(sanitizeFileName("a".repeat(200))).toBe("a".repeat(200));
    expect(sanitizeFileName("a".repeat(201))).toBe("a".repeat(200));
    expect(sanitizeFileName(`${"b".repeat(210)}.${"x".repeat(20)}`)).toBe("b".repeat(200));
    expect(sanitizeFileName(" ..hidden.. ")).toBe("hidden");
    expect(sanitizeFileName('a/b\\c:d*e?f"g<h>i|j')).toBe("a_b_c_d_e_f_g_h_i_j");
    expect(sanitizeFileName("...")).toBeNull();
  });
});
