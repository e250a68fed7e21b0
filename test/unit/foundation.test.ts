import { describe, expect, test } from "bun:test";
import { TokenBucketLimiter } from "../../src/auth/rate-limit";
import { safeEqual } from "../../src/auth/secrets";
import fc from "fast-check";
import { BootstrapError, MAX_DELIVERY_THREADS, parseDeliveryThreads, parseListen, readBootstrap } from "../../src/config/bootstrap";
import { expiryTime, parseSqlTime } from "../../src/db/time";
import { driverSiteOf } from "../../src/channels/factory";
import { MasterKey } from "../../src/config/master-key";
import { isSecureRequest, resolveClientAddress } from "../../src/http/request-info";
import { buildRouteTable } from "../../src/http/route-table";
import { parseAddressSet } from "../../src/net/cidr";
import { formatLine } from "../../src/ops/log";
import { isDiskFull, isOutOfFileDescriptors } from "../../src/errors";

describe("logfmt", () => {
  test("quotes values with spaces, quotes, equals and control characters", () => {
    const line = formatLine(
      "INFO",
      "启动 完成",
      { a: "plain", b: "has space", c: 'q"uote', d: "k=v", e: "line\nbreak", f: 3, g: "", h: undefined },
      new Date(0),
    );
    expect(line).toBe('time=1970-01-01T00:00:00.000Z level=INFO msg="启动 完成" a=plain b="has space" c="q\\"uote" d="k=v" e="line\\nbreak" f=3 g=""');
  });

  test("no value can start a new record: every character a log reader splits lines on is escaped", () => {
    // Python's str.splitlines() boundaries, a superset of what journald, grep and less split on.
    const lineBreak = /[\n\r\v\f\u001c-\u001e\u0085\u2028\u2029]/;
    const forged = formatLine("INFO", "已创建存储渠道", {
      channel: "c\u2028time=2026-01-01T00:00:00Z level=ERROR msg=forged",
      d: "d\u0085level=WARN",
      e: "\u009b31m",
    });
    expect(forged).toBe(
      'time=1970-01-01T00:00:00.000Z level=INFO msg=已创建存储渠道 channel="c\\u2028time=2026-01-01T00:00:00Z level=ERROR msg=forged" d="d\\u0085level=WARN" e="\\u009b31m"'.replace(
        "1970-01-01T00:00:00.000Z",
        forged.slice(5, 29),
      ),
    );
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), fc.string({ unit: "binary" }), (msg, value) => {
        const line = formatLine("WARN", msg, { err: value }, new Date(0));
        expect(lineBreak.test(line)).toBe(false);
        // And the value reads back exactly (a quoted value is a JSON string).
        const raw = line.slice(line.indexOf(" err=") + 5);
        expect(raw.startsWith('"') ? JSON.parse(raw) : raw).toBe(value);
      }),
      { seed: 20261128, numRuns: 2000 },
    );
  });
});

describe("address sets and client address", () => {
  test("CIDR v4/v6, single addresses and IPv4-mapped forms", () => {
    const set = parseAddressSet("10.0.0.0/8, 192.168.1.5, fd00::/8");
    expect(set.has("10.200.3.4")).toBe(true);
    expect(set.has("11.0.0.1")).toBe(false);
    expect(set.has("192.168.1.5")).toBe(true);
    expect(set.has("192.168.1.6")).toBe(false);
    expect(set.has("::ffff:10.1.1.1")).toBe(true);
    expect(set.has("fd12::1")).toBe(true);
    expect(set.has("garbage")).toBe(false);
    expect(parseAddressSet("  ").entries).toEqual([]);
    for (const bad of ["10.0.0.0/33", "fd00::/129", "x", "1.2.3.4/8/9", "10.0.0.0/a"]) expect(() => parseAddressSet(bad)).toThrow();
  });

  test("X-Forwarded-For is honoured only through trusted proxies, right to left", () => {
    const trusted = parseAddressSet("127.0.0.1, 10.0.0.0/8");
    const h = (xff?: string) => new Headers(xff ? { "x-forwarded-for": xff } : {});
    expect(resolveClientAddress("203.0.113.1", h("1.1.1.1"), trusted)).toBe("203.0.113.1");
    expect(resolveClientAddress("127.0.0.1", h(), trusted)).toBe("127.0.0.1");
    expect(resolveClientAddress("127.0.0.1", h("198.51.100.7"), trusted)).toBe("198.51.100.7");
    expect(resolveClientAddress("127.0.0.1", h("6.6.6.6, 198.51.100.7, 10.1.1.1"), trusted)).toBe("198.51.100.7");
    expect(resolveClientAddress("::ffff:127.0.0.1", h("10.2.2.2, 10.1.1.1"), trusted)).toBe("10.2.2.2");
  });

  test("X-Forwarded-For entries with a port are their address; an entry that is no address stops at the hop that wrote it", () => {
    const trusted = parseAddressSet("127.0.0.1, 10.0.0.0/8");
    const h = (xff: string) => new Headers({ "x-forwarded-for": xff });
    // Azure Application Gateway and IIS ARR append the client's source port.
    expect(resolveClientAddress("127.0.0.1", h("203.0.113.9:4711"), trusted)).toBe("203.0.113.9");
    expect(resolveClientAddress("127.0.0.1", h("[2001:db8::1]:4711"), trusted)).toBe("2001:db8::1");
    expect(resolveClientAddress("127.0.0.1", h("[2001:db8::1]"), trusted)).toBe("2001:db8::1");
    expect(resolveClientAddress("127.0.0.1", h("198.51.100.7, 10.1.1.1:80"), trusted)).toBe("198.51.100.7");
    // Text is no client of its own: the trusted hop that reported it stands for the client.
    expect(resolveClientAddress("127.0.0.1", h("not-an-ip <script>"), trusted)).toBe("127.0.0.1");
    expect(resolveClientAddress("127.0.0.1", h("6.6.6.6, junk, 10.1.1.1"), trusted)).toBe("10.1.1.1");
    expect(resolveClientAddress("127.0.0.1", h("203.0.113.9:99999"), trusted)).toBe("127.0.0.1");
  });

  test("X-Forwarded-Proto only from a trusted peer", () => {
    const trusted = parseAddressSet("127.0.0.1");
    const req = new Request("http://x/", { headers: { "x-forwarded-proto": "https" } });
    expect(isSecureRequest(req, "127.0.0.1", trusted)).toBe(true);
    expect(isSecureRequest(req, "203.0.113.1", trusted)).toBe(false);
    expect(isSecureRequest(new Request("https://x/"), "203.0.113.1", trusted)).toBe(true);
  });
});

describe("small pieces", () => {
  test("token bucket: burst, then one per refill period", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(3, 10, () => now);
    expect([limiter.take("k"), limiter.take("k"), limiter.take("k")]).toEqual([0, 0, 0]);
    expect(limiter.take("k")).toBe(10);
    expect(limiter.take("other")).toBe(0);
    now = 9_000;
    expect(limiter.take("k")).toBeGreaterThan(0);
    now = 10_500;
    expect(limiter.take("k")).toBe(0);
  });

  test("a full disk is recognised by code, by message and through a driver's wrapper", () => {
    const enospc = Object.assign(new Error("write failed"), { code: "ENOSPC" });
    expect(isDiskFull(enospc)).toBe(true);
    expect(isDiskFull(Object.assign(new Error("x"), { code: "EDQUOT" }))).toBe(true);
    expect(isDiskFull(new Error("database or disk is full"))).toBe(true);
    expect(isDiskFull(new Error("本地存储写入失败: k: 磁盘配额已用完", { cause: Object.assign(new Error("q"), { code: "EDQUOT" }) }))).toBe(true);
    expect(isDiskFull(new Error("本地存储写入失败: k: 没有权限", { cause: Object.assign(new Error("p"), { code: "EACCES" }) }))).toBe(false);
    const loop = new Error("a cause that points back");
    (loop as { cause?: unknown }).cause = loop;
    expect(isDiskFull(loop)).toBe(false);
    expect([enospc, null, "ENOSPC"].map((e) => isDiskFull(e))).toEqual([true, false, false]);
  });

  test("the file descriptor limit is recognised the same ways, and is not a full disk", () => {
    const emfile = Object.assign(new Error("open failed"), { code: "EMFILE" });
    expect([emfile, Object.assign(new Error("x"), { code: "ENFILE" })].map(isOutOfFileDescriptors)).toEqual([true, true]);
    expect(isOutOfFileDescriptors(new Error("EMFILE: too many open files, open '/data/storage/img/x'"))).toBe(true);
    expect(isOutOfFileDescriptors(new Error("本地存储写入失败: k: 打开的文件过多", { cause: emfile }))).toBe(true);
    expect([isDiskFull(emfile), isOutOfFileDescriptors(Object.assign(new Error("x"), { code: "ENOSPC" }))]).toEqual([false, false]);
    expect([null, "EMFILE", new Error("permission denied")].map(isOutOfFileDescriptors)).toEqual([false, false, false]);
  });

  test("constant-time equality", () => {
    expect(safeEqual("abc", "abc")).toBe(true);
    expect(safeEqual("abc", "abd")).toBe(false);
    expect(safeEqual("abc", "abcd")).toBe(false);
  });

  test("master key seals and opens; fingerprint and derivations are stable", () => {
    const { key, text } = MasterKey.generate();
    const sealed = key.encrypt("秘密 secret");
    expect(sealed).not.toContain("secret");
    expect(key.decrypt(sealed)).toBe("秘密 secret");
    expect(MasterKey.parse(text).fingerprint).toBe(key.fingerprint);
    expect(MasterKey.parse(text).derive("s3", 1).equals(key.derive("s3", 1))).toBe(true);
    expect(key.derive("s3", 1).equals(key.derive("s3", 2))).toBe(false);
    expect(() => MasterKey.generate().key.decrypt(sealed)).toThrow();
    expect(() => MasterKey.parse("short")).toThrow();
  });

  test("an expiry is rounded up to the second, so a TTL never ends early", () => {
    const justBeforeASecond = Date.UTC(2026, 0, 1, 12, 0, 0, 990);
    // 1 s from 12:00:00.990 is 12:00:01.990: stored as 12:00:02, not 12:00:01 (10 ms of life).
    expect(expiryTime(justBeforeASecond, 1)).toBe("2026-01-01 12:00:02");
    expect(expiryTime(Date.UTC(2026, 0, 1, 12, 0, 0, 0), 1)).toBe("2026-01-01 12:00:01");
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4e12 }), fc.integer({ min: 0, max: 10 * 365 * 86400 }), (now, seconds) => {
        const life = parseSqlTime(expiryTime(now, seconds)).getTime() - now;
        return life >= seconds * 1000 && life < seconds * 1000 + 1000;
      }),
      { seed: 42 },
    );
  });

  test("listen address parsing", () => {
    expect(parseListen("0.0.0.0:8080")).toMatchObject({ hostname: "0.0.0.0", port: 8080 });
    expect(parseListen("[::1]:9000")).toMatchObject({ hostname: "::1", port: 9000 });
    expect(parseListen(":8080")).toMatchObject({ hostname: "0.0.0.0", port: 8080 });
    expect(() => parseListen("8080")).toThrow();
    expect(() => parseListen("host:99999")).toThrow();
  });

  test("KURA_DELIVERY_THREADS: auto is cores - 1 (at most 3) started on load; a number starts that many at once", () => {
    expect(parseDeliveryThreads(undefined, 1)).toEqual({ count: 0, eager: false });
    expect(parseDeliveryThreads("", 2)).toEqual({ count: 1, eager: false });
    expect(parseDeliveryThreads(" AUTO ", 8)).toEqual({ count: 3, eager: false });
    expect(parseDeliveryThreads("0", 8)).toEqual({ count: 0, eager: true });
    expect(parseDeliveryThreads("16", 2)).toEqual({ count: 16, eager: true });
    for (const bad of ["17", "-1", "1.5", "two", "100", "0x2"]) expect(() => parseDeliveryThreads(bad, 2)).toThrow(BootstrapError);
    // Any text: a count within 0..16, or a BootstrapError that names the variable, never anything else.
    fc.assert(
      fc.property(fc.string({ maxLength: 8 }), fc.integer({ min: 1, max: 64 }), (text, cores) => {
        try {
          const threads = parseDeliveryThreads(text, cores);
          expect(threads.count).toBeGreaterThanOrEqual(0);
          expect(threads.count).toBeLessThanOrEqual(MAX_DELIVERY_THREADS);
        } catch (err) {
          expect(err).toBeInstanceOf(BootstrapError);
          expect((err as Error).message).toContain("KURA_DELIVERY_THREADS");
        }
      }),
      { seed: 42 },
    );
    expect(() => readBootstrap({ KURA_DELIVERY_THREADS: "many" })).toThrow(BootstrapError);
  });

  test("KURA_CHANNEL_TIMEOUT_MS is read with the other bootstrap variables and reaches every driver through the site", () => {
    expect(readBootstrap({}).channelTimeoutMs).toBeUndefined();
    const boot = readBootstrap({ KURA_CHANNEL_TIMEOUT_MS: " 1500 " });
    expect(boot.channelTimeoutMs).toBe(1500);
    expect(driverSiteOf(boot)).toEqual({ dataDir: boot.dataDir, peerTimeoutMs: 1500 });
    for (const bad of ["99", "1.5s", "-1", "12345678"]) {
      expect(() => readBootstrap({ KURA_CHANNEL_TIMEOUT_MS: bad })).toThrow(BootstrapError);
    }
  });

  test("route table maps raw paths to templates, static before params", () => {
    const table = buildRouteTable([
      { method: "GET", path: "/i/:id" },
      { method: "GET", path: "/o/*" },
      { method: "GET", path: "/api/admin/config/full" },
      { method: "GET", path: "/api/admin/config/:x" },
    ]);
    expect(table.match("GET", "/i/abc")).toBe("/i/:id");
    expect(table.match("HEAD", "/i/abc")).toBe("/i/:id");
    expect(table.match("GET", "/o/u/a/b.png")).toBe("/o/*");
    expect(table.match("GET", "/api/admin/config/full")).toBe("/api/admin/config/full");
    expect(table.match("POST", "/i/abc")).toBeUndefined();
  });
});

describe("scrape-time gauges", () => {
  test("report the reader's value, and NaN when the reader throws", async () => {
    const { Registry } = await import("prom-client");
    const { scrapeGauge } = await import("../../src/ops/metrics");
    const registry = new Registry();
    let fail = false;
    scrapeGauge(registry, "kura_test_gauge", "test", () => {
      if (fail) throw new Error("db gone");
      return 7;
    });
    expect(await registry.metrics()).toContain("kura_test_gauge 7");
    fail = true;
    // prom-client prints "Nan"; Prometheus parses NaN case-insensitively.
    expect(await registry.metrics()).toMatch(/kura_test_gauge nan$/im);
  });
});
