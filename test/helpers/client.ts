import type { KuraServer } from "./server";
import { assertMatchesSpec } from "./openapi";

export interface Principal {
  user: { id: string; name: string; role: string; must_change_password: boolean };
  csrf_token: string;
}

/** A browser-like session: keeps the cookie and sends the CSRF token on writes. */
export class Session {
  cookie = "";
  csrf = "";
  constructor(
    readonly server: KuraServer,
    readonly headers: Record<string, string> = {},
  ) {}

  async login(name: string, password: string): Promise<Response> {
    const res = await fetch(this.server.url("/api/admin/auth/login"), {
      method: "POST",
      headers: { "content-type": "application/json", ...this.headers },
      body: JSON.stringify({ name, password }),
    });
    if (res.ok) {
      const setCookie = res.headers.get("set-cookie") ?? "";
      this.cookie = setCookie.split(";")[0]!;
      this.csrf = ((await res.clone().json()) as Principal).csrf_token;
    }
    return res;
  }

  request(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers, cookie: this.cookie, ...extra };
    if (!["GET", "HEAD"].includes(method) && !("x-csrf-token" in extra)) headers["x-csrf-token"] = this.csrf;
    let payload: BodyInit | undefined;
    if (body instanceof FormData || typeof body === "string") payload = body as BodyInit;
    else if (body !== undefined) {
      headers["content-type"] = "application/json";
      payload = JSON.stringify(body);
    }
    return fetch(this.server.url(path), { method, headers, body: payload, redirect: "manual" });
  }

  async json<T = any>(method: string, path: string, body?: unknown, expectStatus = 200): Promise<T> {
    const res = await this.request(method, path, body);
    const text = await res.text();
    if (res.status !== expectStatus) throw new Error(`${method} ${path}: expected ${expectStatus}, got ${res.status}: ${text}`);
    const parsed = text ? JSON.parse(text) : undefined;
    // Every JSON response a test reads is also checked against openapi.yaml.
    assertMatchesSpec(method, path, res.status, parsed);
    return parsed as T;
  }
}

/** Logs in as the built-in admin and replaces the factory default password. */
export async function adminSession(server: KuraServer, newPassword = "admin-password-1"): Promise<Session> {
  const s = new Session(server);
  const first = await s.login("admin", server.defaultPassword());
  if (first.status !== 200) throw new Error(`login failed: ${first.status} ${await first.text()}`);
  await s.json("PUT", "/api/admin/me/password", { old_password: server.defaultPassword(), new_password: newPassword }, 204);
  const again = await s.login("admin", newPassword);
  if (again.status !== 200) throw new Error(`re-login failed: ${again.status}`);
  return s;
}

export async function expectError(res: Response, status: number): Promise<string> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  const body = JSON.parse(text);
  if (typeof body.error !== "string" || !/[\u4e00-\u9fff]/.test(body.error)) throw new Error(`not a Chinese error envelope: ${text}`);
  if (Object.keys(body).length !== 1) throw new Error(`envelope has extra fields: ${text}`);
  return body.error;
}
