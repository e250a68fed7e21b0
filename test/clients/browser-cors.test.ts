/**
 * A web page on another site uploading with an upload token, as Waline's guide does against Lsky Pro
 * (`fetch` with `Authorization`, so the browser sends a preflight first). Lsky answers CORS for any
 * origin on `api/*`; Kura answered the preflight 404, so the upload never left the browser. Driven
 * in a real headless Chromium from a page on another origin; the console's API must stay unreadable
 * from there, and a preflight for it gets nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { sharedBrowser } from "../console/harness";
import { useAdmin } from "../helpers/fixture";
import { makeJpeg } from "../helpers/images";

const { server, admin } = useAdmin();
let token = "";
let browser: Browser;
let page: Page;
/** The other site: serves the page the uploads are sent from. */
let site: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  token = (await admin.json("POST", "/api/admin/tokens", { name: "comments" }, 201)).token;
  site = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: () => new Response("<!doctype html><title>blog</title>", { headers: { "content-type": "text/html" } }),
  });
  browser = await sharedBrowser();
  page = await (await browser.newContext()).newPage();
  await page.goto(`http://127.0.0.1:${site.port}/`);
}, 60_000);
afterAll(async () => {
  await page?.context().close();
  site?.stop(true);
});

/** Runs `fetch` in the other site's page; the answer's status and JSON, or the browser's refusal. */
async function fetchFromPage(url: string, init: { method: string; headers?: Record<string, string>; jpeg?: number[]; field?: string }) {
  return page.evaluate(
    async ({ url, init }) => {
      let body: FormData | undefined;
      if (init.jpeg) {
        body = new FormData();
        body.append(init.field ?? "file", new Blob([new Uint8Array(init.jpeg)], { type: "image/jpeg" }), "comment.jpg");
      }
      try {
        const res = await fetch(url, { method: init.method, headers: init.headers, body });
        return { status: res.status, json: await res.json(), retryAfterReadable: res.headers.has("retry-after") };
      } catch (err) {
        return { refused: String(err) };
      }
    },
    { url, init },
  );
}

describe("the upload-token API from a page on another origin", () => {
  test("Waline's Lsky upload: preflight, upload, and the link in the answer", async () => {
    const jpeg = [...(await makeJpeg(64, 48, 7))];
    const r = await fetchFromPage(server.url("/api/v1/upload"), {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, Accept: "application/json" },
      jpeg,
    });
    expect(r.status).toBe(200);
    expect(r.json.status).toBe(true);
    expect(r.json.data.links.url).toStartWith(server.base);
    // Kura's own token upload, and an error answer the page can read (to say why).
    const own = await fetchFromPage(server.url("/api/upload"), {
      method: "POST",
      headers: { Authorization: `Bearer ${token}` },
      jpeg: [...(await makeJpeg(64, 48, 8))],
    });
    expect([own.status, typeof own.json?.url]).toEqual([200, "string"]);
    const wrong = await fetchFromPage(server.url("/api/v1/upload"), { method: "POST", headers: { Authorization: "Bearer kura_wrong" }, jpeg });
    expect([wrong.status, wrong.json?.status]).toEqual([401, false]);
  });

  test("the console's API stays unreadable from there, session cookie or not", async () => {
    const me = await fetchFromPage(server.url("/api/admin/me"), { method: "GET" });
    expect(me.refused).toContain("Failed to fetch");
    const login = await fetchFromPage(server.url("/api/admin/auth/login"), { method: "POST", headers: { "content-type": "application/json" } });
    expect(login.refused).toContain("Failed to fetch");
    const lskyLogin = await fetchFromPage(server.url("/api/v1/tokens"), { method: "POST", headers: { "content-type": "application/json" } });
    expect(lskyLogin.refused).toContain("Failed to fetch");
  });
});

describe("preflight answers", () => {
  const preflight = (path: string, headers: Record<string, string> = {}) =>
    fetch(server.url(path), {
      method: "OPTIONS",
      headers: { origin: "https://blog.example", "access-control-request-method": "POST", "access-control-request-headers": "authorization", ...headers },
    });

  test("token-API paths allow any origin without credentials, for a day", async () => {
    for (const path of ["/api/v1/upload", "/api/v1/images/abc", "/api/upload", "/api/upload/url"]) {
      const res = await preflight(path);
      expect([path, res.status]).toEqual([path, 204]);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-headers")).toContain("authorization");
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      expect(res.headers.get("access-control-max-age")).toBe("86400");
    }
  });

  test("nothing for the console's API, and no CORS header on a same-origin answer", async () => {
    // Lsky's password-for-token endpoint stays same-origin: no page may read which password worked.
    // With a trailing slash too: the router takes `/api/v1/tokens/` for `/api/v1/tokens`.
    for (const path of ["/api/admin/upload", "/api/admin/me", "/api/uploads", "/api/v1/tokens", "/api/v1/tokens/", "/api/admin/me/"]) {
      const res = await preflight(path);
      await res.arrayBuffer();
      expect([path, res.headers.get("access-control-allow-origin")]).toEqual([path, null]);
    }
    const sameOrigin = await fetch(server.url("/api/v1/strategies"));
    expect(sameOrigin.headers.get("access-control-allow-origin")).toBeNull();
  });
});
