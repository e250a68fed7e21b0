/**
 * A table generated from openapi.yaml: every state-changing operation behind a session must
 * (1) refuse a session still on the factory default password (403), except the two operations
 *     that exist to get out of that state (logout, own password change), and
 * (2) refuse a missing or wrong X-CSRF-Token (403) —
 * and neither refusal may change anything. Like test/contract/openapi.test.ts, a new route joins
 * the table by being documented; nothing here lists routes by hand except the two exemptions.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { expectError, Session } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import { makeJpeg } from "../helpers/images";
import { spec } from "../helpers/openapi";
import { queryDb } from "../http/channels.helpers";

const STATE_CHANGING = ["post", "put", "patch", "delete"];
/** Reachable with the factory password: otherwise nobody could leave that state (spec: forced change on first login). */
const DEFAULT_PASSWORD_ALLOWED = new Set(["POST /api/admin/auth/logout", "PUT /api/admin/me/password"]);
const LOCK_MESSAGE = "请先修改出厂默认密码，然后重新登录";
const CSRF_MESSAGE = "CSRF 校验失败：缺少或错误的 X-CSRF-Token";

interface Operation {
  method: string;
  template: string;
  path: string;
  contentType?: string;
}

const sessionOperations: Operation[] = [];
for (const [template, item] of Object.entries<Record<string, any>>(spec.paths)) {
  for (const m of STATE_CHANGING) {
    const op = item[m];
    if (!op) continue;
    const security: Record<string, unknown>[] = op.security ?? spec.security ?? [];
    if (!security.some((s) => "session" in s)) continue;
    sessionOperations.push({
      method: m.toUpperCase(),
      template,
      path: template.replace(/\{[^}]+\}/g, "1"),
      contentType: Object.keys(op.requestBody?.content ?? {})[0],
    });
  }
}

/** Rows of every table that a wrongly admitted request could change. */
const TABLES = ["users", "sessions", "tokens", "settings", "channels", "images", "blobs", "referer_rules", "jobs", "dedup_candidates", "audit"];

describe("session guards over every state-changing operation in openapi.yaml", () => {
  let jpeg: Buffer;

  const snapshot = () => Object.fromEntries(TABLES.map((t) => [t, queryDb(server, `SELECT * FROM ${t}`)]));
  const send = async (s: Session, op: Operation, extra: Record<string, string> = {}) => {
    let body: unknown;
    if (op.contentType === "multipart/form-data") {
      body = new FormData();
      (body as FormData).append("file", new Blob([new Uint8Array(jpeg)]), "guard.jpg");
    } else if (op.contentType === "application/json") body = {};
    return s.request(op.method, op.path, body, extra);
  };

  const { server } = useServer();
  beforeAll(async () => {
    jpeg = await makeJpeg(16, 16, 5);
  });

  test("the table covers the session API, and every such operation declares the CSRF token", () => {
    expect(sessionOperations.length).toBeGreaterThanOrEqual(25);
    for (const route of ["POST /api/admin/upload", "PUT /api/admin/config", "POST /api/admin/channels", "DELETE /api/admin/images/{id}"]) {
      expect(sessionOperations.map((o) => `${o.method} ${o.template}`)).toContain(route);
    }
    for (const op of sessionOperations) {
      const security: Record<string, unknown>[] = spec.paths[op.template][op.method.toLowerCase()].security;
      expect(`${op.method} ${op.template} ${JSON.stringify(security)}`).toContain('"csrf"');
    }
  });

  test("a session on the factory password with a valid CSRF token is refused everywhere but logout and password change", async () => {
    const s = new Session(server);
    expect((await s.login("admin", server.defaultPassword())).status).toBe(200);
    const before = snapshot();
    const notRefused: string[] = [];
    for (const op of sessionOperations) {
      if (DEFAULT_PASSWORD_ALLOWED.has(`${op.method} ${op.template}`)) continue;
      const res = await send(s, op);
      const text = await res.text();
      if (res.status !== 403 || !text.includes(LOCK_MESSAGE)) notRefused.push(`${op.method} ${op.path} → ${res.status} ${text.slice(0, 120)}`);
    }
    expect(notRefused).toEqual([]);
    expect(snapshot()).toEqual(before);
    // The exemptions really are reachable: the forced password change succeeds with this session.
    await s.json("PUT", "/api/admin/me/password", { old_password: server.defaultPassword(), new_password: "admin-password-1" }, 204);
  });

  test("a missing or wrong X-CSRF-Token is refused on every operation, and nothing changes", async () => {
    const s = new Session(server);
    expect((await s.login("admin", "admin-password-1")).status).toBe(200);
    const before = snapshot();
    const notRefused: string[] = [];
    for (const op of sessionOperations) {
      for (const token of ["", "wrong-token", s.csrf.slice(0, -1)]) {
        const res = await send(s, op, { "x-csrf-token": token });
        const text = await res.text();
        if (res.status !== 403 || !text.includes(CSRF_MESSAGE))
          notRefused.push(`${op.method} ${op.path} (${JSON.stringify(token)}) → ${res.status} ${text.slice(0, 120)}`);
      }
    }
    expect(notRefused).toEqual([]);
    // Sessions table changes only by the login above (taken before the snapshot); logout did not go through either.
    expect(snapshot()).toEqual(before);
    await expectError(await s.request("POST", "/api/admin/tokens", { name: "x" }, { "x-csrf-token": "" }), 403);
    expect((await s.json("GET", "/api/admin/me")).user.name).toBe("admin");
  });
});
