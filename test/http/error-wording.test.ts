/**
 * Every refusal of a malformed request is the envelope `{"error": "中文说明"}`: one field, Chinese,
 * and none of the wording of the libraries underneath (zod's "Expected string", Elysia's
 * VALIDATION / PARSE / NOT_FOUND, SQLite, sharp/libvips, JavaScript exceptions, stack frames).
 * Properties over hostile bodies, content types, query strings and path parameters for a sample
 * of JSON routes, as anonymous, a regular user and an admin (fixed seed, test/fuzz/fuzz-support.ts).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fuzzParams, hostileString } from "../fuzz/fuzz-support";
import { rawTargetText } from "../fuzz/http-probe";
import { Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { CJK, ENGLISH_PROSE, INTERNAL_WORDING } from "../helpers/messages";

const { server, admin } = useAdmin();
let regular: Session;
let imageId = "";
let victimId = "";
let tokenId = 0;

beforeAll(async () => {
  // Refusals, not the rate limits, are under test.
  await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 1_000_000, max_concurrent_uploads: 64 });
  imageId = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(16, 12, 3), "seed.jpg"))).id;
  victimId = (await admin.json("POST", "/api/admin/users", { name: "wording-victim", password: "victim-password-1" }, 201)).id;
  await admin.json("POST", "/api/admin/users", { name: "wording-user", password: "wording-password-1" }, 201);
  regular = new Session(server);
  expect((await regular.login("wording-user", "wording-password-1")).status).toBe(200);
  tokenId = (await regular.json("POST", "/api/admin/tokens", { name: "wording" }, 201)).id;
});

/** A JSON route and the keys its body knows (an empty list: it takes no body). */
interface Route {
  method: string;
  path: () => string;
  keys: string[];
}

const ROUTES: Route[] = [
  { method: "POST", path: () => "/api/admin/auth/login", keys: ["name", "password"] },
  { method: "PUT", path: () => "/api/admin/me/password", keys: ["old_password", "new_password"] },
  { method: "POST", path: () => "/api/admin/users", keys: ["name", "password", "role", "quota_bytes", "default_ttl_hours"] },
  { method: "PUT", path: () => `/api/admin/users/${victimId}`, keys: ["name", "role", "quota_bytes", "default_ttl_hours", "disabled"] },
  { method: "POST", path: () => `/api/admin/users/${victimId}/password`, keys: ["password"] },
  { method: "PUT", path: () => "/api/admin/config", keys: ["max_upload_mb", "base_url", "exif_policy", "access_mode", "process_widths", "alert_webhook_url"] },
  { method: "POST", path: () => "/api/admin/tokens", keys: ["name", "expires_in_hours"] },
  { method: "POST", path: () => "/api/admin/upload/url", keys: ["url", "file_name", "exif_policy", "ttl"] },
  { method: "POST", path: () => "/api/admin/images/batch-delete", keys: ["ids"] },
  { method: "POST", path: () => "/api/admin/images/batch-exempt", keys: ["ids", "exempt"] },
  { method: "PATCH", path: () => `/api/admin/images/${imageId}`, keys: ["ttl_hours", "cleanup_exempt"] },
  { method: "POST", path: () => "/api/admin/referer-whitelist", keys: ["pattern"] },
  { method: "POST", path: () => "/api/admin/channels/test", keys: ["name", "template", "inputs", "driver", "config", "priority", "channel_id"] },
  { method: "PUT", path: () => "/api/admin/channels/1", keys: ["name", "priority", "allow_direct_link", "template", "driver", "config", "encrypted"] },
  { method: "POST", path: () => "/api/admin/channel-oauth/start", keys: ["template", "inputs", "channel_id"] },
  { method: "POST", path: () => "/api/admin/dedup/1/merge", keys: ["keep_blob_id"] },
  { method: "POST", path: () => `/api/admin/tokens/${tokenId}/rotate`, keys: [] },
];

/** List routes and their query parameters. */
const QUERIES: { path: string; params: string[] }[] = [
  { path: "/api/admin/images", params: ["page", "page_size", "cursor", "search", "user_id", "token_id", "since", "until", "exempt"] },
  { path: "/api/admin/tokens", params: ["page", "page_size", "user_id"] },
  { path: "/api/admin/audit", params: ["page", "page_size", "actor", "action", "target", "since", "until"] },
  { path: "/api/admin/alerts", params: ["status", "page", "page_size"] },
  { path: "/api/admin/dedup", params: ["page", "page_size", "cursor"] },
  { path: "/api/admin/cleanup", params: ["page", "page_size", "cursor"] },
  { path: "/api/admin/channel-oauth/result", params: ["state"] },
  { path: "/api/admin/channel-oauth/callback", params: ["state", "code", "error"] },
  { path: `/api/admin/images/${"x".repeat(10)}/thumb`, params: ["w"] },
];

/** Values of the wrong type, size or shape for any field. */
const wrongValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, "", " ", "null", "[]", "{}", [], {}, [null], { a: 1 }),
  fc.integer(),
  fc.double(),
  hostileString,
);

const body = (keys: string[]) =>
  fc.oneof(
    // The route's own fields, each with any value, plus perhaps an unknown one.
    fc
      .tuple(
        fc.dictionary(fc.constantFrom(...(keys.length ? keys : ["x"])), wrongValue, { maxKeys: keys.length + 1 }),
        fc.option(fc.tuple(hostileString, wrongValue)),
      )
      .map(([fields, extra]) => JSON.stringify(extra ? { ...fields, [extra[0]]: extra[1] } : fields)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    // Not JSON at all, or JSON cut short.
    hostileString,
    fc.jsonValue().map((v) => JSON.stringify(v).slice(0, -1)),
    fc.constantFrom("", "{", "[", '{"a":', "\u0000", "\ufeff{}", '{"__proto__":{"x":1}}', "[".repeat(10_000)),
  );

const contentType = fc.constantFrom(
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data",
  "multipart/form-data; boundary=x",
  "application/xml",
  "",
);

type Who = "anonymous" | "user" | "admin";
const who = fc.constantFrom<Who>("anonymous", "user", "admin");

function headersOf(as: Who): Record<string, string> {
  if (as === "anonymous") return {};
  const s = as === "admin" ? admin : regular;
  return { cookie: s.cookie, "x-csrf-token": s.csrf };
}

/** The answer as the client reads it: its status, and its error when it is a refusal. */
async function send(method: string, path: string, as: Who, init: { type?: string; body?: string } = {}) {
  const headers = headersOf(as);
  if (init.type) headers["content-type"] = init.type;
  const res = await fetch(server.url(path), { method, headers, body: init.body, redirect: "manual" });
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
}

/**
 * A refusal is `{"error": "<Chinese>"}` with nothing of the libraries in it; no malformed request
 * is a 5xx. The thumbnail, an image access endpoint, answers its 404 in plain text (spec 7.2).
 */
function expectEnvelope(where: string, a: { status: number; type: string; text: string }, plainText = false) {
  expect({ where, status: a.status < 500 }).toEqual({ where, status: true });
  if (a.status >= 400) where += ` → ${a.status}`;
  if (a.status < 400) return;
  let error = a.text;
  if (!(plainText && a.type === "text/plain; charset=utf-8")) {
    expect({ where, type: a.type }).toEqual({ where, type: "application/json; charset=utf-8" });
    const parsed = JSON.parse(a.text) as Record<string, unknown>;
    expect({ where, keys: Object.keys(parsed) }).toEqual({ where, keys: ["error"] });
    error = String(parsed.error);
  }
  expect({ where, error, chinese: CJK.test(error) }).toEqual({ where, error, chinese: true });
  expect({ where, error, internal: INTERNAL_WORDING.exec(error)?.[0] ?? null }).toEqual({ where, error, internal: null });
  expect({ where, error, prose: ENGLISH_PROSE.exec(error)?.[0] ?? null }).toEqual({ where, error, prose: null });
}

describe("malformed requests to JSON routes", () => {
  test("any body with any content type, as anyone", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ROUTES).chain((r) => fc.tuple(fc.constant(r), body(r.keys), contentType, who)),
        async ([route, text, type, as]) => {
          const path = route.path();
          const a = await send(route.method, path, as, { type: type || undefined, body: text });
          expectEnvelope(`${as} ${route.method} ${path} [${type}] ${text.slice(0, 80)}`, a);
        },
      ),
      fuzzParams(4),
    );
  });

  test("any query string on list routes, as anyone", async () => {
    const pairs = (params: string[]) =>
      fc.array(
        fc.tuple(
          fc.oneof(fc.constantFrom(...params), hostileString),
          fc.oneof(hostileString, fc.constantFrom("-1", "0", "1e3", "99999999999999999999", "all", "open", "%zz", "[]")),
        ),
        {
          minLength: 1,
          maxLength: 4,
        },
      );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...QUERIES).chain((q) => fc.tuple(fc.constant(q.path), pairs(q.params), who)),
        async ([path, query, as]) => {
          // Raw bytes, invalid escapes included; at most 4 KiB (Bun answers a longer request target itself: 431, no body).
          const qs = query
            .map(([k, v]) => `${rawTargetText(k).slice(0, 1000)}=${rawTargetText(v)}`)
            .join("&")
            .slice(0, 4096);
          expectEnvelope(`${as} GET ${path}?${qs.slice(0, 120)}`, await send("GET", `${path}?${qs}`, as), path.endsWith("/thumb"));
        },
      ),
      fuzzParams(2),
    );
  });

  test("any path parameter, any method", async () => {
    const templates = [
      "/api/admin/users/{}",
      "/api/admin/users/{}/password",
      "/api/admin/tokens/{}",
      "/api/admin/tokens/{}/revoke",
      "/api/admin/tokens/{}/rotate",
      "/api/admin/tokens/{}/s3-credential",
      "/api/admin/images/{}",
      "/api/admin/referer-whitelist/{}",
      "/api/admin/channels/{}",
      "/api/admin/channels/{}/config",
      "/api/admin/channels/{}/check",
      "/api/admin/dedup/{}/dismiss",
      "/api/admin/backups/{}",
      "/api/admin/backups/{}/restore",
      "/api/admin/{}",
      "/api/{}",
    ];
    const segment = fc.oneof(
      fc.constantFrom("0", "-1", "1.5", "1e3", "99999999999999999999", "null", "%zz", "%00", "..", "%2e%2e", "%E4%B8%AD", "a%2Fb"),
      hostileString.map((s) => rawTargetText(s).slice(0, 1000)),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...templates),
        segment,
        fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE"),
        who,
        async (template, seg, method, as) => {
          const path = template.replace("{}", seg || "x");
          // DELETE and the writes get a body that is no JSON, so a route that takes one refuses it.
          const a = await send(method, path, as, method === "GET" ? {} : { type: "application/json", body: "{" });
          expectEnvelope(`${as} ${method} ${path.slice(0, 120)}`, a);
        },
      ),
      fuzzParams(2),
    );
  });
});

test("the admin and the regular user are still logged in and nothing was an internal error", async () => {
  // A property run that changed either password (or logged out) would have left the rest untested.
  expect((await admin.request("GET", "/api/admin/me")).status).toBe(200);
  expect((await regular.request("GET", "/api/admin/me")).status).toBe(200);
  expect(server.logs.split("\n").filter((l) => /level=ERROR/.test(l))).toEqual([]);
});
