import { Elysia } from "elysia";
import { z } from "zod";
import type { AppContext } from "../../context";
import { hashPassword, MIN_PASSWORD_LENGTH, verifyPassword } from "../../auth/passwords";
import type { LoginAdmission } from "../../auth/login-throttle";
import { SESSION_COOKIE, SESSION_DAYS } from "../../auth/sessions";
import { audit } from "../../ops/audit";
import type { UserRow } from "../../users/repo";
import { parseBody } from "../body";
import { ApiError, badRequest, forbidden, notFound, unauthorized } from "../errors";
import { authenticate, readCookie, sessionRoutes } from "../guard";
import { requestInfo } from "../request-info";

const loginBody = z.object({ name: z.string().min(1).max(256), password: z.string().min(1).max(1024) });
const changePasswordBody = z.object({
  old_password: z.string().max(1024),
  new_password: z.string().min(MIN_PASSWORD_LENGTH).max(1024),
});

export function principal(app: AppContext, user: UserRow, sessionToken: string) {
  return {
    user: { id: user.id, name: user.name, role: user.role, must_change_password: !!user.must_change_password },
    csrf_token: app.sessions.csrfFor(sessionToken),
  };
}

function sessionCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${SESSION_COOKIE}=${value}`, "Path=/", `Max-Age=${maxAgeSeconds}`, "HttpOnly", "SameSite=Lax", ...(secure ? ["Secure"] : [])].join("; ");
}

/** Verifies a password under a login admission (429 when refused); shared with the Lsky token endpoint. */
export async function checkPassword(admission: LoginAdmission, password: string, hash: string | undefined): Promise<boolean> {
  if (!admission.ok) {
    const message = admission.reason === "busy" ? "登录请求过多，服务器繁忙，请稍后再试" : "登录尝试过于频繁，请稍后再试";
    throw new ApiError(429, message, { "retry-after": String(admission.retryAfter) });
  }
  let verified = false;
  try {
    verified = await verifyPassword(password, hash);
    return verified;
  } finally {
    admission.release(verified);
  }
}

/**
 * The account as it is now, after the slow password check: undefined when it was deleted or its
 * password changed or reset meanwhile. Those end every session of the user; a login whose check
 * was still running then made one afterwards, on the old password. Read with no await before the
 * session (or token) is written, so nothing can change in between.
 */
export function unchangedSince(app: AppContext, checked: UserRow): UserRow | undefined {
  const now = app.users.byId(checked.id);
  return now && now.password_hash === checked.password_hash ? now : undefined;
}

/**
 * One WARN per password refused at a login, for fail2ban or CrowdSec to act on (the address that
 * failed is in `client`, behind a proxy the real one through KURA_TRUSTED_PROXIES). Bounded by the
 * login throttle: a refused admission (429) is never verified, so it logs nothing.
 */
export function logFailedLogin(app: AppContext, client: string, name: string, via: "console" | "lsky") {
  app.log.warn("登录失败", { client, user: name.slice(0, 64), via });
}

export function authRoutes(app: AppContext) {
  // Reachable on the factory default password, so it can be changed.
  const ownAccount = sessionRoutes(app, "self")
    .get("/api/admin/me", ({ set, principal: p }) => {
      set.headers["cache-control"] = "no-store";
      return principal(app, p.user, p.sessionToken);
    })
    .put("/api/admin/me/password", async ({ request, body, set, principal: p }) => {
      const input = parseBody(changePasswordBody, body);
      if (!(await checkPassword(app.loginLimiter.admitPasswordChange(p.user.id), input.old_password, p.user.password_hash))) throw badRequest("原密码错误");
      if (input.old_password === input.new_password) throw badRequest("新密码不能与原密码相同");
      const hash = await hashPassword(input.new_password);
      // An administrator's reset (or a deletion) during the two argon2 runs is not overwritten.
      if (!unchangedSince(app, p.user)) throw unauthorized("账号的密码已被更改，请重新登录");
      app.users.setPassword(p.user.id, hash, false);
      app.sessions.deleteAllForUser(p.user.id);
      audit(app.db, p.user, "user.password_change", p.user.id);
      set.headers["set-cookie"] = sessionCookie("", 0, requestInfo(request).secure);
      set.status = 204;
    });

  // A user's sessions: where each logged in from, and ending any of them (a cookie left on a
  // borrowed machine) without a password change, which would end them all.
  const ownSessions = sessionRoutes(app, "user")
    .get("/api/admin/me/sessions", ({ set, principal: p }) => {
      set.headers["cache-control"] = "no-store";
      const items = app.sessions.list(p.user.id, p.sessionToken);
      return { items, total: items.length };
    })
    .delete("/api/admin/me/sessions/:id", ({ params, request, set, principal: p }) => {
      if (!app.sessions.endById(p.user.id, params.id)) throw notFound("会话不存在或已结束");
      audit(app.db, p.user, "auth.session_end", p.user.id, { ended: 1 });
      if (app.sessions.isCurrent(params.id, p.sessionToken)) set.headers["set-cookie"] = sessionCookie("", 0, requestInfo(request).secure);
      set.status = 204;
    })
    .post("/api/admin/me/sessions/end-others", ({ principal: p }) => {
      const ended = app.sessions.endOthers(p.user.id, p.sessionToken);
      if (ended > 0) audit(app.db, p.user, "auth.session_end", p.user.id, { ended });
      return { ended };
    });

  // Login and logout are the open exceptions listed in ../access.ts.
  return new Elysia()
    .post("/api/admin/auth/login", async ({ body, request, set }) => {
      const input = parseBody(loginBody, body);
      const info = requestInfo(request);
      const user = app.users.byName(input.name);
      const verified = await checkPassword(app.loginLimiter.admitLogin(info.client, input.name), input.password, user?.password_hash);
      const account = verified && user ? unchangedSince(app, user) : undefined;
      if (!account) {
        logFailedLogin(app, info.client, input.name, "console");
        throw unauthorized("用户名或密码错误");
      }
      if (account.disabled) throw forbidden("该账号已被停用");
      const session = app.sessions.create(account.id, Date.now(), { client: info.client, userAgent: request.headers.get("user-agent") ?? "" });
      set.headers["set-cookie"] = sessionCookie(session.token, SESSION_DAYS * 86_400, info.secure);
      set.headers["cache-control"] = "no-store";
      audit(app.db, account, "auth.login", account.id, { client: info.client });
      return principal(app, account, session.token);
    })
    .post("/api/admin/auth/logout", ({ request, set }) => {
      // Idempotent: an absent or already-ended session still gets a cleared cookie.
      const token = readCookie(request, SESSION_COOKIE);
      if (token && app.sessions.lookup(token)) authenticate(app, request, { allowDefaultPassword: true });
      if (token) app.sessions.delete(token);
      set.headers["set-cookie"] = sessionCookie("", 0, requestInfo(request).secure);
      set.status = 204;
    })
    .use(ownAccount)
    .use(ownSessions);
}
