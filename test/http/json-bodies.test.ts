/**
 * Spec section 4: "JSON bodies use application/json". A route that reads a JSON body refuses a
 * form or text body with 400, before anything happens: that is what keeps a cross-site HTML form
 * (which can send urlencoded, multipart and text/plain bodies without a CORS preflight) from
 * logging a visitor's browser into an attacker's account. Routes that read raw bodies (uploads,
 * Lsky Pro's token form) still take their forms.
 */
import { describe, expect, test } from "bun:test";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { makePng } from "../helpers/images";

const { server, admin } = useAdmin();
const PASSWORD = "admin-password-1";
const NOT_JSON = "请求体必须是有效的 JSON（Content-Type: application/json）";

/** The three bodies an HTML form on another site can send, each with the admin's credentials. */
function formBodies(fields: Record<string, string>): Array<[string, BodyInit, Record<string, string>]> {
  const multipart = new FormData();
  for (const [k, v] of Object.entries(fields)) multipart.append(k, v);
  return [
    ["urlencoded", new URLSearchParams(fields).toString(), { "content-type": "application/x-www-form-urlencoded" }],
    ["multipart", multipart, {}],
    [
      "text/plain",
      Object.entries(fields)
        .map(([k, v]) => `${k}=${v}`)
        .join("\r\n"),
      { "content-type": "text/plain" },
    ],
  ];
}

describe("login takes JSON only", () => {
  for (const [kind, body, headers] of formBodies({ name: "admin", password: PASSWORD })) {
    test(`a ${kind} body with the right password from a foreign page is a 400 and sets no session cookie`, async () => {
      const res = await fetch(server.url("/api/admin/auth/login"), {
        method: "POST",
        headers: { ...headers, origin: "https://evil.example", "sec-fetch-site": "cross-site" },
        body,
      });
      expect(res.headers.get("set-cookie")).toBeNull();
      expect(await expectError(res, 400)).toBe(NOT_JSON);
    });
  }

  test("the same credentials as application/json (with a charset) log in", async () => {
    const res = await fetch(server.url("/api/admin/auth/login"), {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8" },
      body: JSON.stringify({ name: "admin", password: PASSWORD }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("set-cookie")).toContain("kura_session=");
  });

  test("a JSON body under another JSON-ish type is refused too", async () => {
    const res = await fetch(server.url("/api/admin/auth/login"), {
      method: "POST",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ name: "admin", password: PASSWORD }),
    });
    expect(await expectError(res, 400)).toBe(NOT_JSON);
  });
});

describe("every other JSON route too, even with a valid session and CSRF token", () => {
  test("PUT /api/admin/config with a urlencoded body is a 400 and changes nothing", async () => {
    const before = await admin.json("GET", "/api/admin/config");
    const res = await admin.request("PUT", "/api/admin/config", "max_upload_mb=3", {
      "content-type": "application/x-www-form-urlencoded",
      "x-csrf-token": admin.csrf,
    });
    expect(await expectError(res, 400)).toBe(NOT_JSON);
    expect(await admin.json("GET", "/api/admin/config")).toEqual(before);
  });

  test("POST /api/admin/tokens with a multipart body is a 400 and issues no token", async () => {
    const form = new FormData();
    form.append("name", "from-a-form");
    const res = await admin.request("POST", "/api/admin/tokens", form);
    expect(await expectError(res, 400)).toBe(NOT_JSON);
    const tokens = await admin.json<{ items: Array<{ name: string }> }>("GET", "/api/admin/tokens");
    expect(tokens.items.map((t) => t.name)).not.toContain("from-a-form");
  });
});

test("a content type on a request without a body changes nothing (some clients send one with every POST)", async () => {
  const { id } = await admin.json<{ id: number }>("POST", "/api/admin/tokens", { name: "bodiless-delete" }, 201);
  const res = await admin.request("POST", `/api/admin/tokens/${id}/revoke`, undefined, {
    "content-type": "application/x-www-form-urlencoded",
    "x-csrf-token": admin.csrf,
  });
  expect(res.status).toBe(204);
});

describe("routes that read their own bodies keep taking forms", () => {
  test("POST /api/admin/upload (multipart) still uploads", async () => {
    const form = new FormData();
    form.append("file", new File([await makePng(20, 20, 7)], "ok.png", { type: "image/png" }));
    const res = await admin.request("POST", "/api/admin/upload", form);
    expect(`${res.status} ${await res.text()}`).toStartWith("200 ");
  });

  test("Lsky Pro's POST /api/v1/tokens still takes a urlencoded form", async () => {
    const res = await fetch(server.url("/api/v1/tokens"), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: new URLSearchParams({ email: "admin", password: PASSWORD }).toString(),
    });
    const body = (await res.json()) as { status: boolean; data: { token?: string } };
    expect(res.status).toBe(200);
    expect(body.status).toBe(true);
    expect(body.data.token).toBeString();
  });
});
