import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAddressSet } from "../../src/net/cidr.ts";
import { fetchToFile, fileNameFromUrl, sanitizeFileName, type FetchToFileOptions } from "../../src/net/safe-fetch.ts";
import { importRefusal } from "../helpers/url-import";

// Self-signed (valid until 2126) for the made-up name img.test.invalid; used as its own CA.
const TLS_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6wIUMbo7NFneElle
Qr3a0bNiYNEfmcT+rs4TY5OveF+hRANCAAREkaALmZ+WI3Voj/Jhitwl6bfzaV58
He2KXNqrzh/5RkLhTySP8ypQ7VTmI01C3VIJRMFTPu1JFUyBPtStPML+
-----END PRIVATE KEY-----`;
const TLS_CERT = `-----BEGIN CERTIFICATE-----
MIIBqjCCAVCgAwIBAgIUUigJCjNyAbkDmFA6nRwiAgMilLwwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQaW1nLnRlc3QuaW52YWxpZDAgFw0yNjExMjMwNzIyMjNaGA8y
MTI2MTAzMDA3MjIyM1owGzEZMBcGA1UEAwwQaW1nLnRlc3QuaW52YWxpZDBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABESRoAuZn5YjdWiP8mGK3CXpt/NpXnwd7Ypc
2qvOH/lGQuFPJI/zKlDtVOYjTULdUglEwVM+7UkVTIE+1K08wv6jcDBuMB0GA1Ud
DgQWBBTftn/YWv0HyM9ObWKOp9vkcyAfXDAfBgNVHSMEGDAWgBTftn/YWv0HyM9O
bWKOp9vkcyAfXDAPBgNVHRMBAf8EBTADAQH/MBsGA1UdEQQUMBKCEGltZy50ZXN0
LmludmFsaWQwCgYIKoZIzj0EAwIDSAAwRQIgNyjKuIceVXCtz1Uln66MP64dOBLP
JotM+TmhaN7QSGgCIQDQfhahObDeigJatD1s1WAbocZuoo/IuQJTviMUrYXLrg==
-----END CERTIFICATE-----`;

const PAYLOAD = new Uint8Array(200_000).map((_, i) => (i * 31 + 7) & 0xff);
const LOCAL = parseAddressSet("127.0.0.1/32");
/** Resolver that knows made-up names only: any real DNS lookup of them would fail. */
const fakeDns = (table: Record<string, string[]>) => {
  const asked: string[] = [];
  const resolve = async (host: string) => {
    asked.push(host);
    const a = table[host];
    if (!a) throw new Error("ENOTFOUND");
    return a;
  };
  return { resolve, asked };
};

let dir: string;
let dest: string;
let hits: { path: string; host: string | null }[] = [];
let produced = 0;
let plain: ReturnType<typeof Bun.serve>;
let secure: ReturnType<typeof Bun.serve>;

function route(req: Request): Response | Promise<Response> {
  const url = new URL(req.url);
  hits.push({ path: url.pathname + url.search, host: req.headers.get("host") });
  const p = url.pathname;
  if (p.startsWith("/img/")) {
    const wanted = url.searchParams.get("host");
    if (wanted && req.headers.get("host") !== wanted) return new Response("wrong host", { status: 421 });
    return new Response(PAYLOAD, { headers: { "content-type": "image/png" } });
  }
  if (p.startsWith("/chain/")) {
    const n = Number(p.split("/")[2]);
    // relative Location: resolved against the hop's own (host name) URL
    return n === 0 ? Response.redirect(`/img/end.png`, 302) : new Response(null, { status: 302, headers: { location: `/chain/${n - 1}` } });
  }
  if (p === "/to-metadata") return Response.redirect("http://169.254.169.254/latest/meta-data", 302);
  if (p === "/to-loopback-name") return Response.redirect(`http://inner.test.invalid:${url.port}/img/x.png`, 301);
  if (p === "/dir/") return Response.redirect("/img/from-redirect.jpg", 307);
  if (p === "/missing.png") return new Response("nope", { status: 404 });
  if (p === "/declared-huge") return new Response(PAYLOAD, { headers: { "content-length": String(PAYLOAD.length) } });
  if (p === "/endless") {
    const chunk = new Uint8Array(64 * 1024).fill(0xab);
    return new Response(
      new ReadableStream({
        pull(c) {
          produced += chunk.length;
          c.enqueue(chunk);
        },
      }),
    );
  }
  if (p === "/slow-body") {
    return new Response(
      new ReadableStream({
        async pull(c) {
          c.enqueue(new Uint8Array(10));
          await Bun.sleep(100);
        },
      }),
    );
  }
  if (p === "/no-headers") return Bun.sleep(5_000).then(() => new Response("late"));
  return new Response("not found", { status: 404 });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kura-safe-fetch-"));
  plain = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: route });
  secure = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { key: TLS_KEY, cert: TLS_CERT }, fetch: route });
});
afterAll(() => {
  plain.stop(true);
  secure.stop(true);
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  hits = [];
});

let n = 0;
const nextDest = () => (dest = join(dir, `out-${++n}.bin`));

const importError = (url: string, opts: Partial<FetchToFileOptions> = {}) => importRefusal(url, nextDest(), { maxBytes: 1_000_000, ...opts });

describe("pinning", () => {
  test("connects to the resolved address with the original Host header (no second DNS lookup)", async () => {
    const dns = fakeDns({ "img.test.invalid": ["127.0.0.1"] });
    const host = `img.test.invalid:${plain.port}`;
    const url = `http://${host}/img/cat.png?host=${encodeURIComponent(host)}`;
    const res = await fetchToFile(url, nextDest(), { maxBytes: 1_000_000, resolve: dns.resolve, allow: LOCAL });
    expect(res.bytes).toBe(PAYLOAD.length);
    expect(new Uint8Array(readFileSync(dest))).toEqual(PAYLOAD);
    expect(res.contentType).toBe("image/png");
    expect(res.suggestedName).toBe("cat.png");
    expect(res.finalUrl).toBe(url);
    expect(dns.asked).toEqual(["img.test.invalid"]);
    expect(hits).toEqual([{ path: `/img/cat.png?host=${encodeURIComponent(host)}`, host }]);
  });

  test("https: SNI and certificate check use the host name, not the pinned IP", async () => {
    const dns = fakeDns({ "img.test.invalid": ["127.0.0.1"], "evil.test.invalid": ["127.0.0.1"] });
    const opts = { maxBytes: 1_000_000, resolve: dns.resolve, allow: LOCAL, ca: TLS_CERT };
    const res = await fetchToFile(`https://img.test.invalid:${secure.port}/img/a.webp`, nextDest(), opts);
    expect(res.bytes).toBe(PAYLOAD.length);
    expect(new Uint8Array(readFileSync(dest))).toEqual(PAYLOAD);
    // Same IP, but the certificate is not valid for this name: must fail, not silently connect.
    const err = await importError(`https://evil.test.invalid:${secure.port}/img/a.webp`, opts);
    expect([err.status, err.code]).toEqual([400, "network"]);
  });

  test("an IPv6 answer is pinned as a bracketed literal", async () => {
    const v6 = Bun.serve({ hostname: "::1", port: 0, fetch: (req) => new Response(`host=${req.headers.get("host")}`) });
    try {
      const dns = fakeDns({ "v6.test.invalid": ["::1"] });
      const opts = { maxBytes: 1000, resolve: dns.resolve, allow: parseAddressSet("::1/128") };
      await fetchToFile(`http://v6.test.invalid:${v6.port}/p.png`, nextDest(), opts);
      expect(readFileSync(dest, "utf8")).toBe(`host=v6.test.invalid:${v6.port}`);
    } finally {
      v6.stop(true);
    }
  });

  test("a host name that does not resolve gives dns_failed", async () => {
    const err = await importError(`http://nowhere.test.invalid/x.png`, { resolve: fakeDns({}).resolve });
    expect([err.status, err.code]).toEqual([400, "dns_failed"]);
    expect(err.message).not.toContain("ENOTFOUND");
  });
});

describe("refused destinations", () => {
  test("loopback literals without allow, never contacted", async () => {
    for (const host of ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"]) {
      const err = await importError(`http://${host}:${plain.port}/img/x.png`);
      expect([err.status, err.code]).toEqual([400, "refused_address"]);
    }
    expect(hits).toEqual([]);
  });

  test("a name resolving to a private address, or to a mix of public and private", async () => {
    const dns = fakeDns({ "intranet.test.invalid": ["10.1.2.3"], "mixed.test.invalid": ["1.1.1.1", "10.1.2.3"] });
    for (const host of ["intranet.test.invalid", "mixed.test.invalid"]) {
      const err = await importError(`http://${host}/x.png`, { resolve: dns.resolve });
      expect([err.status, err.code]).toEqual([400, "refused_address"]);
      expect(err.message).not.toContain("10.1.2.3");
    }
  });

  test("a redirect to the cloud metadata address is checked again and refused", async () => {
    const err = await importError(`http://127.0.0.1:${plain.port}/to-metadata`, { allow: LOCAL });
    expect([err.status, err.code]).toEqual([400, "refused_address"]);
    expect(hits.map((h) => h.path)).toEqual(["/to-metadata"]);
  });

  test("each redirect hop is resolved again", async () => {
    // The first hop is allowed; the redirect target's name resolves to loopback, which is not.
    const dns = fakeDns({ "inner.test.invalid": ["127.0.0.2"] });
    const err = await importError(`http://127.0.0.1:${plain.port}/to-loopback-name`, { allow: LOCAL, resolve: dns.resolve });
    expect(err.code).toBe("refused_address");
    expect(dns.asked).toEqual(["inner.test.invalid"]);
  });

  test("only http and https, no credentials", async () => {
    for (const url of ["ftp://example.com/a.png", "file:///etc/passwd", "gopher://x/", "not a url", "http://user:pw@example.com/a.png"]) {
      const err = await importError(url);
      expect([url, err.status, err.code]).toEqual([url, 400, "bad_url"]);
    }
  });
});

describe("redirects", () => {
  test("five redirects are followed, six are refused", async () => {
    const ok = await fetchToFile(`http://127.0.0.1:${plain.port}/chain/4`, nextDest(), { maxBytes: 1_000_000, allow: LOCAL });
    expect(ok.finalUrl).toBe(`http://127.0.0.1:${plain.port}/img/end.png`);
    expect(ok.suggestedName).toBe("4"); // named after the URL the user gave, not the last hop
    expect(hits.length).toBe(6);
    hits = [];
    const err = await importError(`http://127.0.0.1:${plain.port}/chain/5`, { allow: LOCAL });
    expect([err.status, err.code]).toEqual([400, "too_many_redirects"]);
    expect(hits.length).toBe(6); // the 7th request is never made
  });

  test("upstream non-2xx is a 400", async () => {
    const err = await importError(`http://127.0.0.1:${plain.port}/missing.png`, { allow: LOCAL });
    expect([err.status, err.code]).toEqual([400, "upstream_status"]);
    expect(err.message).toContain("404");
  });
});

describe("size cap", () => {
  test("an endless body fails with 413 as soon as the cap is passed, file removed", async () => {
    produced = 0;
    const maxBytes = 1024 * 1024;
    const err = await importError(`http://127.0.0.1:${plain.port}/endless`, { allow: LOCAL, maxBytes });
    expect([err.status, err.code]).toEqual([413, "too_large"]);
    await Bun.sleep(200);
    const settled = produced;
    await Bun.sleep(200);
    // The connection is gone: the server stopped producing, and produced little
    // beyond the cap (socket buffers), i.e. nothing was slurped into memory.
    expect(produced).toBe(settled);
    expect(produced).toBeLessThan(maxBytes + 16 * 1024 * 1024);
  });

  test("a declared Content-Length above the cap is refused before reading", async () => {
    const err = await importError(`http://127.0.0.1:${plain.port}/declared-huge`, { allow: LOCAL, maxBytes: 1000 });
    expect([err.status, err.code]).toEqual([413, "too_large"]);
  });

  test("exactly the cap is accepted", async () => {
    const res = await fetchToFile(`http://127.0.0.1:${plain.port}/img/x.png`, nextDest(), { maxBytes: PAYLOAD.length, allow: LOCAL });
    expect(res.bytes).toBe(PAYLOAD.length);
  });
});

describe("timeouts and cancellation", () => {
  test("a body that trickles past the total timeout", async () => {
    const started = Date.now();
    const err = await importError(`http://127.0.0.1:${plain.port}/slow-body`, { allow: LOCAL, timeoutMs: 400 });
    expect([err.status, err.code]).toEqual([400, "timeout"]);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  test("a server that never sends headers hits the connect timeout", async () => {
    const started = Date.now();
    const err = await importError(`http://127.0.0.1:${plain.port}/no-headers`, { allow: LOCAL, connectTimeoutMs: 300 });
    expect([err.status, err.code]).toEqual([400, "timeout"]);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  test("the caller's signal cancels the download", async () => {
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 200);
    const err = await importError(`http://127.0.0.1:${plain.port}/slow-body`, { allow: LOCAL, signal: ctl.signal });
    expect(err.code).toBe("aborted");
  });
});

describe("file name", () => {
  test.each([
    ["http://h/a/b/photo.jpg?x=1#frag", "photo.jpg"],
    ["http://h/%E7%8C%AB%E5%92%AA.png", "猫咪.png"],
    ["http://h/my%20file.gif", "my file.gif"],
    ["http://h/..%2F..%2Fetc%2Fpasswd", "_.._etc_passwd"],
    ["http://h/%zz.png", "%zz.png"], // malformed escape kept as is
    ["http://h/a/b/", null],
    ["http://h/", null],
    ["http://h/..", null],
  ])("%s -> %p", (url, name) => {
    expect(fileNameFromUrl(url)).toBe(name);
  });

  test("sanitizing strips controls and bidi overrides and keeps the extension when cutting", () => {
    expect(sanitizeFileName("a\u0000b\u202Egnp.exe")).toBe("abgnp.exe");
    expect(sanitizeFileName("  .hidden.png ")).toBe("hidden.png");
    const long = sanitizeFileName(`${"长".repeat(300)}.jpeg`)!;
    expect(long.endsWith(".jpeg")).toBe(true);
    expect(new TextEncoder().encode(long).length).toBeLessThanOrEqual(200);
  });

  test("trailing slash falls back to the redirect target's name, then to a generic name, unless given", async () => {
    const base = `http://127.0.0.1:${plain.port}`;
    const opts = { maxBytes: 1_000_000, allow: LOCAL };
    expect((await fetchToFile(`${base}/dir/`, nextDest(), opts)).suggestedName).toBe("from-redirect.jpg");
    const dns = fakeDns({ "img.test.invalid": ["127.0.0.1"] });
    const viaName = `http://img.test.invalid:${plain.port}/img/`;
    expect((await fetchToFile(viaName, nextDest(), { ...opts, resolve: dns.resolve })).suggestedName).toBe("image");
    expect((await fetchToFile(viaName, nextDest(), { ...opts, resolve: dns.resolve, fileName: "a/b.png" })).suggestedName).toBe("a_b.png");
  });
});
