import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Driver } from "../../src/channels/driver.ts";
import { createWebdavDriver, webdavDriverOptions } from "../../src/channels/drivers/webdav.ts";
import { parseMultistatus } from "../../src/channels/drivers/webdav/multistatus.ts";
import { relativeFromHref } from "../../src/channels/drivers/webdav/paths.ts";
import { obscure } from "../../src/channels/rclone/obscure.ts";
import { driverConformance, listKeys, readAll } from "./conformance.ts";
import { FakeDav } from "./fakes/webdav.ts";
import { startApacheDav } from "./servers/apache.ts";
import { errorOf } from "../helpers/rejection";

const USER = "kura";
const PASSWORD = "dav-Pa55/wörd+x";
const scratch = await mkdtemp(join(tmpdir(), "kura-webdav-test-"));
const apache = await startApacheDav(join(scratch, "apache"), { [USER]: PASSWORD });
afterAll(async () => {
  await apache.stop();
  await rm(scratch, { recursive: true, force: true });
});

function config(overrides: Record<string, string> = {}): Record<string, string> {
  return { url: apache.url, vendor: "other", user: USER, pass: obscure(PASSWORD), ...overrides };
}

let counter = 0;
driverConformance("webdav (Apache mod_dav, nested path)", async () => {
  const path = `conformance-${++counter}/nested`;
  return { driver: createWebdavDriver(config({ path })), cleanup: async () => {} };
});

driverConformance("webdav (Apache mod_dav, endpoint root, vendor nextcloud)", async () => {
  // A second DAV alias would need a restart; a fresh sub-URL is just as private.
  const url = `${apache.url}root-${++counter}/`;
  await mkdir(join(apache.davDir, `root-${counter}`));
  return { driver: createWebdavDriver(config({ url, vendor: "nextcloud" })), cleanup: async () => {} };
});

describe("webdav against Apache: what lands on the server", () => {
  const driver = createWebdavDriver(config({ path: "disk-check/base" }));

  test("objects are stored as plain files under url + path, parents created by MKCOL", async () => {
    const bytes = new TextEncoder().encode("hello dav");
    await driver.put("a b/c+d/名.txt", bytes, bytes.byteLength);
    const onDisk = await readFile(join(apache.davDir, "disk-check/base/a b/c+d/名.txt"));
    expect(onDisk.toString()).toBe("hello dav");
  });

  test("list and head see files written by another client, with Apache's own href encoding", async () => {
    const dir = join(apache.davDir, "disk-check/base/foreign/x y");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "%41&=ü.bin"), new Uint8Array(5));
    expect(await listKeys(driver, "foreign/")).toEqual(["foreign/x y/%41&=ü.bin"]);
    expect((await driver.head("foreign/x y/%41&=ü.bin"))?.size).toBe(5);
    // A collection is not an object.
    expect(await driver.head("foreign/x y")).toBeNull();
  });

  test("a deleted parent directory is recreated on the next put (stale MKCOL cache)", async () => {
    await driver.put("cache/one", new Uint8Array([1]), 1);
    await rm(join(apache.davDir, "disk-check/base/cache"), { recursive: true });
    await driver.put("cache/two", new Uint8Array([2]), 1);
    expect((await stat(join(apache.davDir, "disk-check/base/cache/two"))).size).toBe(1);
  });
});

describe("webdav vendor quirks and auth headers (recorded in front of Apache)", () => {
  const seen: { method: string; headers: Headers }[] = [];
  let proxy: ReturnType<typeof Bun.serve>;
  beforeAll(() => {
    proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(req) {
        seen.push({ method: req.method, headers: new Headers(req.headers) });
        const target = new URL(new URL(req.url).pathname, apache.url);
        const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
        return fetch(target, { method: req.method, headers: req.headers, body, redirect: "manual", decompress: false } as RequestInit);
      },
    });
  });
  afterAll(() => proxy.stop(true));
  const viaProxy = (o: Record<string, string>) => createWebdavDriver(config({ url: `http://127.0.0.1:${proxy.port}/dav/`, ...o }));

  test("nextcloud/owncloud: PUT carries X-OC-Mtime and the SHA1 OC-Checksum of the bytes", async () => {
    seen.length = 0;
    const bytes = new TextEncoder().encode("checksummed");
    await viaProxy({ vendor: "owncloud", path: "quirks" }).put("oc.txt", bytes, bytes.byteLength);
    const put = seen.find((r) => r.method === "PUT")!;
    expect(put.headers.get("oc-checksum")).toBe(`SHA1:${createHash("sha1").update(bytes).digest("hex")}`);
    expect(Math.abs(Number(put.headers.get("x-oc-mtime")) - Date.now() / 1000)).toBeLessThan(60);
    expect(put.headers.get("content-length")).toBe(String(bytes.byteLength));
    expect(put.headers.get("authorization")).toBe(`Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString("base64")}`);
  });

  test("vendor other sends no ownCloud headers", async () => {
    seen.length = 0;
    await viaProxy({ vendor: "other", path: "quirks" }).put("plain.txt", new Uint8Array([1]), 1);
    const put = seen.find((r) => r.method === "PUT")!;
    expect(put.headers.has("oc-checksum")).toBe(false);
    expect(put.headers.has("x-oc-mtime")).toBe(false);
  });

  test("bearer_token is sent as Authorization: Bearer when no user/pass is set", async () => {
    seen.length = 0;
    const err = await errorOf(viaProxy({ user: "", pass: "", bearer_token: "tok-123" }).probe(false));
    expect(seen[0].headers.get("authorization")).toBe("Bearer tok-123");
    // Apache only knows Basic: the token is refused, and the error does not repeat it.
    expect(err.message).toContain("401");
    expect(err.message).not.toContain("tok-123");
  });
});

describe("webdav failures are reported in Chinese without secrets", () => {
  test("wrong password: probe fails with an auth error that never contains the password", async () => {
    const wrong = "not-the-password-42";
    const obscured = obscure(wrong);
    const err = await errorOf(createWebdavDriver(config({ pass: obscured })).probe(false));
    expect(err.message).toContain("认证失败");
    for (const secret of [wrong, obscured, Buffer.from(`${USER}:${wrong}`).toString("base64")]) {
      expect(err.message).not.toContain(secret);
    }
  });

  test("a pass that is not rclone-obscured is refused without echoing it", () => {
    expect(() => createWebdavDriver(config({ pass: "plain text!" }))).toThrow(/obscure/);
    try {
      createWebdavDriver(config({ pass: "plain text!" }));
    } catch (e) {
      expect((e as Error).message).not.toContain("plain text!");
    }
  });

  test("config validation", () => {
    expect(() => createWebdavDriver({})).toThrow("缺少 url");
    expect(() => createWebdavDriver(config({ url: "ftp://x/" }))).toThrow("http");
    expect(() => createWebdavDriver(config({ url: `http://u:secret@127.0.0.1:${apache.port}/dav/` }))).toThrow("不能包含用户名或密码");
    expect(() => createWebdavDriver(config({ vendor: "sharepoint" }))).toThrow("暂不支持");
    expect(() => createWebdavDriver(config({ path: "../up" }))).toThrow("path");
    expect(webdavDriverOptions.map((o) => o.key).sort()).toEqual(["bearer_token", "pass", "path", "url", "user", "vendor"]);
    expect(webdavDriverOptions.find((o) => o.key === "pass")).toMatchObject({ type: "password", sensitive: true });
  });

  test("a url that is not a DAV collection fails the probe", async () => {
    const err = await errorOf(createWebdavDriver(config({ url: `http://127.0.0.1:${apache.port}/not-dav/` })).probe(false));
    expect(err.message).toMatch(/WebDAV/);
  });
});

describe("multistatus parsing (answers shaped like other servers')", () => {
  const endpoint = new URL("https://cloud.example/remote.php/dav/files/al%20ice/");

  test("prefixes, default namespace, absolute URLs, lower-case escapes, 404 propstats", () => {
    const xml = `<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns" xmlns:oc="http://owncloud.org/ns">
 <d:response><d:href>/remote.php/dav/files/al%20ice/kura/</d:href>
  <d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype><d:getlastmodified>Mon, 23 Nov 2026 07:37:01 GMT</d:getlastmodified></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
  <d:propstat><d:prop><d:getcontentlength/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
 <response xmlns="DAV:"><href>https://cloud.example/remote.php/dav/files/al%20ice/kura/a%2bb%c3%a9%26.jpg</href>
  <propstat><prop><resourcetype/><getcontentlength>1234</getcontentlength><oc:checksums><oc:checksum>SHA1:ab</oc:checksum></oc:checksums></prop><status>HTTP/1.1 200 OK</status></propstat></response>
 <D:response xmlns:D="DAV:"><D:href>/remote.php/dav/files/al%20ice/kura/&#x41;&amp;b.txt</D:href>
  <D:propstat><D:prop><D:getcontentlength><![CDATA[7]]></D:getcontentlength></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
</d:multistatus>`;
    const entries = parseMultistatus(xml);
    expect(entries.map((e) => relativeFromHref(e.href, endpoint))).toEqual(["kura", "kura/a+bé&.jpg", "kura/A&b.txt"]);
    expect(entries.map((e) => e.collection)).toEqual([true, false, false]);
    expect(entries.map((e) => e.size)).toEqual([undefined, 1234, 7]);
    expect(entries[0].modified?.toISOString()).toBe("2026-11-23T07:37:01.000Z");
    expect(entries.every((e) => e.ok)).toBe(true);
  });

  test("hrefs outside the endpoint are not mapped; a whole-response 404 is not ok", () => {
    expect(relativeFromHref("/remote.php/dav/files/bob/x", endpoint)).toBeNull();
    expect(relativeFromHref("/remote.php/dav/files/al%20ice/a%2Fb", endpoint)).toBeNull();
    const [gone] = parseMultistatus(`<multistatus xmlns="DAV:"><response><href>/x</href><status>HTTP/1.1 404 Not Found</status></response></multistatus>`);
    expect(gone.ok).toBe(false);
    expect(() => parseMultistatus("<html><body>login</body></html>")).toThrow("DAV:multistatus");
    expect(() => parseMultistatus("<d:multistatus xmlns:d='DAV:'><d:response>")).toThrow("XML");
  });
});

describe("webdav server restarts", () => {
  let driver: Driver;
  beforeAll(() => {
    driver = createWebdavDriver(config({ path: "restart" }));
  });

  test("server stopped: probe fails in Chinese; restarted: probe and reads work again", async () => {
    await driver.put("kept.bin", new Uint8Array([7, 7]), 2);
    await apache.stop();
    const err = await errorOf(driver.probe(false));
    expect(err.message).toContain("WebDAV 连接失败");
    expect(err.message).toContain("连接被拒绝");
    await apache.start();
    await driver.probe(true);
    expect(Array.from(await readAll((await driver.get("kept.bin")).stream))).toEqual([7, 7]);
  });
});

describe("webdav peers that answer PROPFIND badly", () => {
  const dav = new FakeDav();
  afterAll(() => dav.stop());
  const driver = () => createWebdavDriver({ url: dav.url, vendor: "other", bearer_token: "dav-token" });

  test("an endless multistatus is read to 8 MiB, then refused in Chinese", async () => {
    dav.propfindMode = "endless";
    const err = await errorOf(driver().probe(false));
    expect(err.message).toMatch(/WebDAV PROPFIND 的响应超过 8 MiB/);
    // The rest is cancelled: the peer stops at what the socket buffers hold (how much that is
    // depends on the machine's load: 27 MB were seen in a busy CI run), and sends no more.
    let sent = -1;
    while (dav.sentJunk !== sent) {
      sent = dav.sentJunk;
      await Bun.sleep(200);
    }
    expect(sent).toBeLessThan(64 * 1024 * 1024);
  });

  test("a connection dropped mid-answer is a Chinese error without the runtime's English", async () => {
    dav.propfindMode = "reset";
    const err = await errorOf(driver().probe(false));
    // The url is configuration: not named (spec 6.3).
    expect(err.message).toMatch(/^WebDAV 连接失败: [\u4e00-\u9fff]/);
    expect(err.message).not.toContain("127.0.0.1");
    expect(err.message).not.toMatch(/verbose|socket|Unexpected/i);
    dav.propfindMode = "ok";
    await driver().probe(false);
  });
});
