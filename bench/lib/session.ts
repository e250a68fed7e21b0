// Admin login for benchmarks, mirroring test/helpers/client.ts without the spec validation.
import type { BenchServer } from "./server";

/** Cookie + CSRF token of a logged-in user; writes send both, as a browser would. */
export class BenchSession {
  cookie = "";
  csrf = "";
  constructor(readonly server: BenchServer) {}

  async login(name: string, password: string): Promise<void> {
    const res = await fetch(this.server.url("/api/admin/auth/login"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name, password }),
    });
    if (res.status !== 200) throw new Error(`登录失败：HTTP ${res.status}`);
    this.cookie = (res.headers.get("set-cookie") ?? "").split(";")[0]!;
    this.csrf = ((await res.json()) as { csrf_token: string }).csrf_token;
  }

  /** Headers that authenticate a state-changing request. */
  authHeaders(): Record<string, string> {
    return { cookie: this.cookie, "x-csrf-token": this.csrf };
  }

  async json<T = unknown>(method: string, path: string, body?: unknown, expectStatus = 200): Promise<T> {
    const headers: Record<string, string> = { cookie: this.cookie };
    if (method !== "GET" && method !== "HEAD") headers["x-csrf-token"] = this.csrf;
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(this.server.url(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status !== expectStatus) throw new Error(`${method} ${path}：期望 ${expectStatus}，实际 ${res.status}：${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Merges settings through PUT /api/admin/config (a partial document). */
  async setConfig(patch: Record<string, unknown>): Promise<void> {
    await this.json("PUT", "/api/admin/config", patch);
  }
}

/**
 * Logs in as the built-in admin with the factory default password from the server log,
 * replaces it (every other admin endpoint answers 403 until then) and logs in again.
 */
export async function adminSession(server: BenchServer, newPassword = "bench-admin-password-1"): Promise<BenchSession> {
  const first = new BenchSession(server);
  const factory = server.defaultPassword();
  await first.login("admin", factory);
  await first.json("PUT", "/api/admin/me/password", { old_password: factory, new_password: newPassword }, 204);
  const session = new BenchSession(server);
  await session.login("admin", newPassword);
  return session;
}
