/**
 * Who is asking, at the edges `bun run mutate request-identity` found untested: the client address
 * behind trusted proxies (empty and half-written X-Forwarded-For entries, the port's range), the
 * scheme a trusted proxy reports, the origin links are built from, the Host a route needs, the
 * placeholder URL of requests Bun built from a short, missing or unparsable Host, and hotlink
 * matching and pattern validation at their boundaries.
 */
import { describe, expect, test } from "bun:test";
import { parseAddressSet } from "../../src/net/cidr.ts";
import { hostMatches, InvalidRefererPatternError, refererAllowed, validateRefererPattern } from "../../src/delivery/referer.ts";
import { hasOrigin, PLACEHOLDER_ORIGIN, routableRequest, withPlaceholderOrigin } from "../../src/http/raw-url.ts";
import { rawTarget } from "../../src/shared/url-target";
import {
  HOST_REQUIRED,
  isSecureRequest,
  publicOrigin,
  requestInfo,
  requireUsableHost,
  resolveClientAddress,
  setRequestInfo,
} from "../../src/http/request-info.ts";

describe("the client address behind trusted proxies", () => {
  const trusted = parseAddressSet("127.0.0.1, 10.0.0.0/8");
  const client = (xff: string) => resolveClientAddress("127.0.0.1", new Headers({ "x-forwarded-for": xff }), trusted);

  test("empty entries are skipped, not taken for text that stops the walk", () => {
    expect(client(", 198.51.100.7,, 10.1.1.1 ,")).toBe("198.51.100.7");
  });

  test("an entry is an address only as a whole: text around a bracketed or dotted address makes it none", () => {
    for (const junk of ["x[2001:db8::1]:4711", "[2001:db8::1]:4711x", "x203.0.113.9:4711", "203.0.113.9:4711x"]) {
      expect([junk, client(`6.6.6.6, ${junk}, 10.1.1.1`)]).toEqual([junk, "10.1.1.1"]);
    }
  });

  test("the port after an address is any of 0..65535", () => {
    expect(client("203.0.113.9:65535")).toBe("203.0.113.9");
    expect(client("[2001:db8::2]:65535")).toBe("2001:db8::2");
    expect(client("203.0.113.9:65536")).toBe("127.0.0.1");
    expect(client("[2001:db8::2]:65536")).toBe("127.0.0.1");
  });
});

describe("the scheme a trusted proxy reports", () => {
  const trusted = parseAddressSet("127.0.0.1");
  const secure = (proto?: string, peer = "127.0.0.1") =>
    isSecureRequest(new Request("http://kura.test/", { headers: proto === undefined ? {} : { "x-forwarded-proto": proto } }), peer, trusted);

  test("the first of a list, in any case and spacing; anything else is plain http", () => {
    expect([secure("HTTPS"), secure(" https , http"), secure("https,http")]).toEqual([true, true, true]);
    expect([secure("http"), secure("http, https"), secure(""), secure(), secure("wss")]).toEqual([false, false, false, false, false]);
  });
});

describe("the origin links are built from", () => {
  const request = (url: string, host?: string) => new Request(url, { headers: host ? { host } : {} });

  test("base_url wins; else the Host header, https when the request was secure", () => {
    const plain = request("http://10.0.0.2:8080/x", "img.example:8080");
    expect(publicOrigin(plain, "https://cdn.example")).toBe("https://cdn.example");
    expect(publicOrigin(plain, "")).toBe("http://img.example:8080");
    const behindTls = request("http://10.0.0.2:8080/x", "img.example");
    setRequestInfo(behindTls, { peer: "127.0.0.1", client: "198.51.100.7", secure: true });
    expect(publicOrigin(behindTls, "")).toBe("https://img.example");
    expect(requestInfo(behindTls)).toEqual({ peer: "127.0.0.1", client: "198.51.100.7", secure: true });
  });

  test("a request the server never described is nobody's, over plain http", () => {
    const stray = request("http://kura.test/x");
    expect(requestInfo(stray)).toEqual({ peer: "", client: "", secure: false });
    expect(publicOrigin(stray, "")).toBe("http://kura.test");
  });
});

describe("the Host a route needs", () => {
  const refusal = (host: string | undefined, path = "/api/x") => {
    try {
      requireUsableHost(new Request("http://kura.test/", { headers: host === undefined ? {} : { host } }), path);
      return null;
    } catch (err) {
      return [(err as { status?: number }).status, (err as Error).message];
    }
  };

  test("missing or unusable: 400 in Chinese, except for /healthz (HAProxy's checks send none)", () => {
    expect(refusal("img.example:8080")).toBeNull();
    for (const bad of ["", "a b", "a:99999", "a, b"]) expect([bad, refusal(bad)]).toEqual([bad, [400, HOST_REQUIRED]]);
    expect(refusal("", "/healthz")).toBeNull();
    expect(refusal("a b", "/healthz")).toBeNull();
  });
});

describe("the URL routes see", () => {
  test("the request target as sent, without building a URL", () => {
    expect(rawTarget("http://h.example/a%2Fb?x=1&y")).toEqual({ path: "/a%2Fb", query: "x=1&y" });
    expect(rawTarget("http://h.example")).toEqual({ path: "/", query: "" });
    expect(rawTarget("/bare?q")).toEqual({ path: "/bare", query: "q" });
    expect([hasOrigin("https://h/"), hasOrigin("http://h/"), hasOrigin("/https://"), hasOrigin("ftp://h/")]).toEqual([true, true, false, false]);
  });

  test("a Host of four characters or more: the request itself", () => {
    const request = new Request("http://abcd/s3/api/x?q=1");
    expect(routableRequest(request)).toBe(request);
  });

  test("a shorter Host, none, or one no parser takes: the placeholder origin, the same target, method, headers and body", async () => {
    for (const [url, expected] of [
      ["http://a/s3/api/x?q=1", `${PLACEHOLDER_ORIGIN}/s3/api/x?q=1`],
      ["https://a/s3/api/x", "https://kura.invalid/s3/api/x"],
      ["/healthz", `${PLACEHOLDER_ORIGIN}/healthz`],
      ["http://a:99999/x", `${PLACEHOLDER_ORIGIN}/x`],
    ] as const) {
      const request = new Request("http://stand-in.example/", { method: "POST", headers: { host: "a", "x-test": "1" }, body: "payload" });
      // The URL as Bun builds it from the Host, including the bare target and an authority no parser takes.
      const received = Object.defineProperty(request, "url", { value: url });
      const routed = routableRequest(received);
      expect([url, routed.url, routed.method, routed.headers.get("host"), routed.headers.get("x-test")]).toEqual([url, expected, "POST", "a", "1"]);
      expect(await routed.text()).toBe("payload");
    }
  });

  test("a target that is no path (CONNECT's authority form) becomes /", () => {
    const request = new Request("http://x/");
    expect(withPlaceholderOrigin(request, "example.com:443").url).toBe(`${PLACEHOLDER_ORIGIN}/`);
    expect(withPlaceholderOrigin(request, "/a/../b").url).toBe(`${PLACEHOLDER_ORIGIN}/b`);
  });
});

describe("hotlink matching at its boundaries", () => {
  test("an absent Referer is empty; a blank one is empty too, whatever allow_empty_referer says", () => {
    expect([refererAllowed(undefined, ["example.com"], true), refererAllowed(undefined, ["example.com"], false)]).toEqual([true, false]);
    expect([refererAllowed("   ", ["example.com"], true), refererAllowed(" \t", ["example.com"], false)]).toEqual([true, false]);
  });

  test("hand-edited rules with blanks around them still match", () => {
    expect(refererAllowed("https://example.com/", [" example.com "], false)).toBe(true);
    expect(hostMatches("a.example.com", " *.example.com ")).toBe(true);
  });

  test("a subdomain rule needs a whole label before the domain", () => {
    expect(hostMatches(".cdn.example.org", "*.cdn.example.org")).toBe(false);
    expect(refererAllowed("http://.cdn.example.org/", ["*.cdn.example.org"], false)).toBe(false);
    expect(hostMatches("a.cdn.example.org", "*.cdn.example.org")).toBe(true);
  });
});

describe("hotlink rules as saved", () => {
  const message = (input: string) => {
    try {
      validateRefererPattern(input);
      return null;
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidRefererPatternError);
      return (err as Error).message;
    }
  };

  test("each refusal says what is wrong", () => {
    expect(message("")).toBe("域名规则不能为空");
    expect(message("exa mple.com")).toBe("域名规则不能包含空格");
    expect(message("*.")).toBe("域名规则缺少域名部分");
    expect(message("a.*.example.com")).toBe("通配符只能以 *. 开头，表示匹配所有子域名（如 *.example.com）");
    expect(message("*.192.168.1.10")).toBe("IP 地址不能使用通配符");
    expect(message("*.[2001:db8::1]")).toBe("IP 地址不能使用通配符");
    expect(message("ab-.example.com")).toBe("域名格式无效");
  });

  test("a host name of up to 253 characters", () => {
    const label = "a".repeat(63);
    const longest = [label, label, label, "a".repeat(61)].join("."); // 253
    expect(validateRefererPattern(longest)).toBe(longest);
    expect(message(`${longest}a`)).toBe("域名格式无效");
  });
});
