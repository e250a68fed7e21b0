/**
 * A user's own sessions (audit 15 LOW-11): where each logged in from, and ending one of them, or
 * every other one, without a password change (which ends them all). Another user's sessions are
 * never seen nor ended; the ids in the list cannot be used as a cookie.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { SessionView } from "../../src/auth/sessions";
import { adminSession, expectError, Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";

const PASSWORD = "admin-password-1";

/** A list item, as the server builds it. */
type SessionItem = SessionView;

let server: KuraServer;
let admin: Session;

beforeAll(async () => {
  server = await KuraServer.start();
  admin = await adminSession(server, PASSWORD);
  await admin.json("POST", "/api/admin/users", { name: "alice", password: "alice-pass-1" }, 201);
});
afterAll(() => server.dispose());

/** A fresh login as `name` from a browser that says `userAgent`. */
async function browser(name: string, password: string, userAgent: string): Promise<Session> {
  const s = new Session(server, { "user-agent": userAgent });
  expect((await s.login(name, password)).status).toBe(200);
  return s;
}

const sessionsOf = async (s: Session) => {
  const list = await s.json<{ items: SessionItem[]; total: number }>("GET", "/api/admin/me/sessions");
  expect(list.total).toBe(list.items.length); // spec 2.1: every list carries its total
  return list.items;
};
const signedIn = async (s: Session) => (await s.request("GET", "/api/admin/me")).status === 200;

describe("own sessions", () => {
  test("the list shows each of the user's sessions with where it logged in from, the current one marked, and no other user's", async () => {
    const phone = await browser("alice", "alice-pass-1", "Phone Browser/1.0");
    const laptop = await browser("alice", "alice-pass-1", "Laptop Browser/2.0");
    const items = await sessionsOf(laptop);
    expect(items.map((i) => i.user_agent)).toEqual(expect.arrayContaining(["Phone Browser/1.0", "Laptop Browser/2.0"]));
    expect(items.filter((i) => i.current).map((i) => i.user_agent)).toEqual(["Laptop Browser/2.0"]);
    for (const item of items) {
      expect(item.client).toBe("127.0.0.1");
      expect(item.id).toMatch(/^[0-9a-f]{24}$/);
      // An id is not a cookie: presented as one it signs nobody in.
      const forged = await fetch(server.url("/api/admin/me"), { headers: { cookie: `kura_session=${item.id}` } });
      expect(forged.status).toBe(401);
    }
    // The admin's own list holds none of alice's sessions.
    const adminItems = await sessionsOf(admin);
    expect(adminItems.some((i) => items.some((a) => a.id === i.id))).toBe(false);
    expect(await signedIn(phone)).toBe(true);
  });

  test("a User-Agent is kept to 256 characters", async () => {
    const s = await browser("alice", "alice-pass-1", `Long/${"x".repeat(2000)}`);
    const mine = (await sessionsOf(s)).find((i) => i.current)!;
    expect(mine.user_agent.length).toBe(256);
    expect(mine.user_agent).toStartWith("Long/xxx");
  });

  test("ending another of one's sessions signs it out at once, writes the audit entry, and leaves the current one", async () => {
    const left = await browser("alice", "alice-pass-1", "Borrowed Machine/1.0");
    const here = await browser("alice", "alice-pass-1", "My Machine/1.0");
    const target = (await sessionsOf(here)).find((i) => i.user_agent === "Borrowed Machine/1.0")!;
    const res = await here.request("DELETE", `/api/admin/me/sessions/${target.id}`);
    expect(res.status).toBe(204);
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await signedIn(left)).toBe(false);
    expect(await signedIn(here)).toBe(true);
    expect((await sessionsOf(here)).some((i) => i.id === target.id)).toBe(false);
    // Ended once: the same id again is not found.
    expect(await expectError(await here.request("DELETE", `/api/admin/me/sessions/${target.id}`), 404)).toContain("会话");
    const audit = await admin.json("GET", "/api/admin/audit?action=auth.session_end");
    expect(audit.items.some((e: { actor_name: string }) => e.actor_name === "alice")).toBe(true);
  });

  test("another user's session id is not found and stays signed in; without the CSRF token nothing ends", async () => {
    const victim = await browser("admin", PASSWORD, "Admin Desk/1.0");
    const victimId = (await sessionsOf(victim)).find((i) => i.current)!.id;
    const alice = await browser("alice", "alice-pass-1", "Alice/1.0");
    expect(await expectError(await alice.request("DELETE", `/api/admin/me/sessions/${victimId}`), 404)).toContain("会话");
    expect(await signedIn(victim)).toBe(true);
    const other = await browser("admin", PASSWORD, "Admin Laptop/1.0");
    const otherId = (await sessionsOf(other)).find((i) => i.current)!.id;
    expect(await expectError(await victim.request("DELETE", `/api/admin/me/sessions/${otherId}`, undefined, { "x-csrf-token": "" }), 403)).toContain("CSRF");
    expect(await expectError(await victim.request("POST", "/api/admin/me/sessions/end-others", undefined, { "x-csrf-token": "" }), 403)).toContain("CSRF");
    expect(await signedIn(other)).toBe(true);
  });

  test("ending the current session is a logout: the cookie is cleared and the session is gone", async () => {
    const s = await browser("alice", "alice-pass-1", "Alice/2.0");
    const mine = (await sessionsOf(s)).find((i) => i.current)!;
    const res = await s.request("DELETE", `/api/admin/me/sessions/${mine.id}`);
    expect(res.status).toBe(204);
    expect(res.headers.get("set-cookie")).toMatch(/^kura_session=; .*Max-Age=0/);
    expect(await signedIn(s)).toBe(false);
  });

  test("end-others ends every other session of the user, not the current one and not another user's", async () => {
    // One after another: one address gets at most 2 password checks at a time.
    const others: Session[] = [];
    for (const i of [1, 2, 3]) others.push(await browser("alice", "alice-pass-1", `Other/${i}`));
    const here = await browser("alice", "alice-pass-1", "Here/1.0");
    const before = (await sessionsOf(here)).length;
    expect(before).toBeGreaterThanOrEqual(4);
    const { ended } = await here.json("POST", "/api/admin/me/sessions/end-others");
    expect(ended).toBe(before - 1);
    for (const s of others) expect(await signedIn(s)).toBe(false);
    expect(await signedIn(here)).toBe(true);
    expect((await sessionsOf(here)).map((i) => i.user_agent)).toEqual(["Here/1.0"]);
    expect(await signedIn(admin)).toBe(true);
    // Nothing left to end.
    expect((await here.json("POST", "/api/admin/me/sessions/end-others")).ended).toBe(0);
  });

  test("a user keeps at most 100 sessions: the 101st login ends the oldest, and only it", async () => {
    await admin.json("POST", "/api/admin/users", { name: "looper", password: "looper-pass-1" }, 201);
    const first = await browser("looper", "looper-pass-1", "First/1.0");
    const second = await browser("looper", "looper-pass-1", "Second/1.0");
    for (let i = 0; i < 98; i++) await browser("looper", "looper-pass-1", `Loop/${i}`);
    expect(await signedIn(first)).toBe(true);
    const last = await browser("looper", "looper-pass-1", "Last/1.0");
    expect([await signedIn(first), await signedIn(second), await signedIn(last)]).toEqual([false, true, true]);
    const listed = await sessionsOf(last);
    expect(listed.length).toBe(100);
    expect(listed.some((i) => i.user_agent === "First/1.0")).toBe(false);
    // Another user's sessions are not touched by looper's.
    expect(await signedIn(admin)).toBe(true);
  });

  test("on the factory default password the list is refused like every other route but me, password and logout", async () => {
    const fresh = await KuraServer.start();
    try {
      const s = new Session(fresh);
      expect((await s.login("admin", fresh.defaultPassword())).status).toBe(200);
      expect(await expectError(await s.request("GET", "/api/admin/me/sessions"), 403)).toContain("默认密码");
      expect(await expectError(await s.request("POST", "/api/admin/me/sessions/end-others"), 403)).toContain("默认密码");
    } finally {
      await fresh.dispose();
    }
  });
});
