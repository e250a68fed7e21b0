// Hostile-input edges of the HTTP surface (audit .scratch/audit-http, F6, F8, F10, F11), on a real
// server: requests without a usable Host, Range headers the server must ignore, text that must be
// stored exactly as it is answered, impossible timestamps. Delivery threads: request-edges-threads.test.ts.
import { beforeAll, describe, expect, test } from "bun:test";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";
import { rawRequest } from "../helpers/raw-http";

const { server, admin } = useAdmin();
let id: string;
let png: Uint8Array;
let token: string;

beforeAll(async () => {
  await admin.json("PUT", "/api/admin/config", { exif_policy: "passthrough", upload_rate_per_min: 10_000 });
  png = await makePng(64, 48, 7);
  token = (await admin.json("POST", "/api/admin/tokens", { name: "edges" }, 201)).token;
  const up = await fetch(server.url("/api/upload"), {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: form(png, "edge.png", { object_key: "edges/a.png" }),
  });
  expect(up.status).toBe(200);
  id = ((await up.json()) as { id: string }).id;
});

/** HTTP/1.0 with the given Host line(s) (none when empty): the server closes after its answer. */
const get = (target: string, ...hosts: string[]) => rawRequest(server.base, `GET ${target} HTTP/1.0\r\n${hosts.map((h) => `Host: ${h}\r\n`).join("")}\r\n`);

/** Host values no URL can be built from, as a client or a broken proxy may send them. */
const UNUSABLE_HOSTS: string[][] = [[], ["x y"], ['x"y'], [""], ["a:99999"], ["a%20b"], ["[::1"], ["a", "b"]];

describe("a request without a usable Host (F6)", () => {
  test("/healthz answers 200 ok whenever the process is up: HAProxy's httpchk sends HTTP/1.0 without Host", async () => {
    for (const hosts of UNUSABLE_HOSTS) {
      for (const target of ["/healthz", "/healthz?probe=1", "/x/../healthz"]) {
        const res = await get(target, ...hosts);
        expect([JSON.stringify(hosts), target, res.status, res.text]).toEqual([JSON.stringify(hosts), target, 200, "ok"]);
      }
    }
  });

  test("every route of the router answers 400 naming the Host (RFC 9112 §3.2), never a 500, and logs no crash", async () => {
    const logged = server.logs.length;
    const targets = ["/api/admin/me", "/api/admin/images?since=x", "/o/default/edges/a.png", "/metrics", "/", "//healthz", `/i/${id}/x`];
    for (const hosts of UNUSABLE_HOSTS) {
      for (const target of targets) {
        const res = await get(target, ...hosts);
        const seen = [JSON.stringify(hosts), target, res.status, res.headers.get("content-type")];
        expect(seen).toEqual([JSON.stringify(hosts), target, 400, "application/json; charset=utf-8"]);
        expect(JSON.parse(res.text)).toEqual({ error: expect.stringContaining("Host") });
        expect(JSON.parse(res.text).error).toMatch(/[\u4e00-\u9fff]/);
      }
    }
    // The S3 surface says so in S3's XML (spec 4.13): its clients cannot read a JSON body.
    for (const hosts of UNUSABLE_HOSTS) {
      const res = await get("/s3/kura/edges/a.png", ...hosts);
      expect([JSON.stringify(hosts), res.status, res.headers.get("content-type")]).toEqual([JSON.stringify(hosts), 400, "application/xml"]);
      expect(res.text).toMatch(/<Error><Code>InvalidArgument<\/Code><Message>[^<]*Host[^<]*<\/Message>/);
    }
    // A body on its way in changes nothing (a chunked one is wrapped before routing: serve.ts capBody).
    const post = await rawRequest(
      server.base,
      `POST /api/admin/tokens HTTP/1.1\r\nHost: x y\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    );
    expect([post.status, JSON.parse(post.text).error]).toEqual([400, expect.stringContaining("Host")]);
    expect(server.logs.slice(logged)).not.toContain("level=ERROR");
  });

  test("/i/ serves the image as it would with a Host: its answer does not depend on one", async () => {
    for (const hosts of UNUSABLE_HOSTS) {
      const res = await get(`/i/${id}`, ...hosts);
      expect([JSON.stringify(hosts), res.status]).toEqual([JSON.stringify(hosts), 200]);
      expect(res.body.equals(Buffer.from(png))).toBe(true);
      expect(res.headers.get("etag")).toMatch(/^"[0-9a-f]{64}"$/);
    }
    expect((await get("/i/nope", "x y")).status).toBe(404);
  });
});

describe("Range on image delivery (F8, RFC 9110 §14.2)", () => {
  const whole = ["lines=1-2", "items=0-0", "bytes=9-1", "bytes=abc", "bytes=-", "bytes=", "bytes=0-1,5-6", "bytes 0-1", "bytes=0x1-2"];

  test("a unit other than bytes, or a byte range that is not well-formed, is ignored: 200 with the whole image", async () => {
    for (const path of [`/i/${id}`, "/o/default/edges/a.png"]) {
      for (const range of whole) {
        const res = await fetch(server.url(path), { headers: { range } });
        expect([path, range, res.status, res.headers.get("content-range")]).toEqual([path, range, 200, null]);
        expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(png))).toBe(true);
      }
    }
  });

  test("a well-formed range with no byte in the image is 416 with Content-Range bytes */size; a satisfiable one is 206", async () => {
    const size = png.byteLength;
    for (const path of [`/i/${id}`, "/o/default/edges/a.png"]) {
      for (const range of [`bytes=${size}-`, "bytes=999999-", `bytes=${size}-${size + 5}`, "bytes=-0"]) {
        const res = await fetch(server.url(path), { headers: { range } });
        expect([path, range, res.status, res.headers.get("content-range")]).toEqual([path, range, 416, `bytes */${size}`]);
      }
      // The unit is case-insensitive (RFC 9110 §14.1).
      for (const range of ["bytes=2-5", "Bytes=2-5", ` bytes=2-5 `]) {
        const res = await fetch(server.url(path), { headers: { range } });
        expect([range, res.status, res.headers.get("content-range")]).toEqual([range, 206, `bytes 2-5/${size}`]);
        expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(png.subarray(2, 6)))).toBe(true);
      }
    }
  });
});

describe("text is stored exactly as it is answered (F10)", () => {
  const upload = async (fileName: string) => {
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(16, 16, fileName.length), fileName));
    return (await admin.json("GET", `/api/admin/images/${up.id}`)).file_name as string;
  };

  test("a file name over 255 UTF-16 units is cut at a character boundary, never inside a surrogate pair or a flag", async () => {
    const emoji = "😀".repeat(300);
    const stored = await upload(emoji);
    expect(stored.isWellFormed()).toBe(true);
    expect(stored).toBe("😀".repeat(127));
    // Flags are two code points each (four units): a cut at a code point alone would leave half a flag.
    const flags = "🇯🇵".repeat(100);
    expect(await upload(flags)).toBe("🇯🇵".repeat(63));
    const plain = `${"a".repeat(254)}😀tail.png`;
    expect(await upload(plain)).toBe("a".repeat(254));
    expect(await upload("short 😀.png")).toBe("short 😀.png");
  });

  test("a lone surrogate anywhere in a JSON body is a 400; nothing is created", async () => {
    const send = (method: string, path: string, json: string) => admin.request(method, path, json, { "content-type": "application/json" });
    // Written as JSON text: the escapes reach the server as sent.
    const cases: [string, string, string][] = [
      ["POST", "/api/admin/tokens", '{"name":"a\\ud800b"}'],
      ["POST", "/api/admin/tokens", '{"name":"a\\udc00"}'],
      ["POST", "/api/admin/tokens", '{"name":"ok","na\\ud800me":1}'],
      ["POST", "/api/admin/users", '{"name":"u\\ud83d","password":"password-1"}'],
      ["POST", "/api/admin/referer-whitelist", '{"pattern":"\\ud800.example.com"}'],
      ["PUT", "/api/admin/config", '{"alert_webhook_url":"https://hooks.example.com/\\udfff"}'],
      ["POST", "/api/admin/upload/url", '{"url":"https://img.example.com/a.png","file_name":"\\ud800.png"}'],
    ];
    for (const [method, path, json] of cases) {
      const message = await expectError(await send(method, path, json), 400);
      expect([path, message]).toEqual([path, expect.stringContaining("Unicode")]);
    }
    const tokens = (await admin.json("GET", "/api/admin/tokens?page_size=100")).items as { name: string }[];
    expect(tokens.map((t) => t.name).filter((n) => n !== "edges")).toEqual([]);
    expect((await admin.json("GET", "/api/admin/users")).items.map((u: { name: string }) => u.name)).toEqual(["admin"]);
    expect((await admin.json("GET", "/api/admin/config/full")).settings.alert_webhook_url).toBe("");

    // Well-formed text outside the BMP is kept exactly.
    const issued = await admin.json("POST", "/api/admin/tokens", { name: "😀 ok" }, 201);
    expect(issued.name).toBe("😀 ok");
    const listed = (await admin.json("GET", "/api/admin/tokens?page_size=100")).items as { name: string }[];
    expect(listed.map((t) => t.name)).toContain("😀 ok");
  });
});

describe("impossible timestamps in list filters (F11)", () => {
  test("since/until of images and the audit log must name a real UTC second: 400 otherwise", async () => {
    const impossible = [
      "2020-13-45 99:99:99",
      "2021-02-29 00:00:00",
      "2020-04-31 12:00:00",
      "2020-01-01 24:00:00",
      "2020-12-31 23:59:60",
      "2020-01-01 00:60:00",
    ];
    for (const path of ["/api/admin/images", "/api/admin/audit"]) {
      for (const name of ["since", "until"]) {
        for (const value of impossible) {
          const message = await expectError(await admin.request("GET", `${path}?${name}=${encodeURIComponent(value)}`), 400);
          expect([path, name, value, message]).toEqual([path, name, value, expect.stringContaining(name)]);
        }
        // A leap day, the first and the last second of the format's range are real.
        for (const value of ["2020-02-29 23:59:59", "0000-01-01 00:00:00", "9999-12-31 23:59:59"]) {
          await admin.json("GET", `${path}?${name}=${encodeURIComponent(value)}`);
        }
      }
    }
  });
});
