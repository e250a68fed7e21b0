/**
 * A password reset, a stop or a deletion ends all of the user's sessions (spec 3.7, 5.6), also the
 * one a login is about to make: the login read the account, spent ~100 ms on argon2, and then made
 * its session without looking again. A login on the old password that started before the reset's
 * write and finished after it kept a working session (and the Lsky token endpoint a working token).
 */
import { describe, expect, test } from "bun:test";
import { Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";

describe("a login whose password check overlaps a change to the account", () => {
  // Real argon2 cost (0.2 s a check), not the suite's low one: the window is the check's length.
  const { server, admin } = useAdmin({ env: { KURA_TEST_PASSWORD_COST: undefined } });
  const setDisabled = async (id: string, disabled: boolean) => {
    const user = (await admin.json("GET", "/api/admin/users")).items.find((u: { id: string }) => u.id === id);
    await admin.json("PUT", `/api/admin/users/${id}`, {
      name: user.name,
      role: user.role,
      quota_bytes: user.quota_bytes,
      default_ttl_hours: user.default_ttl_hours,
      disabled,
    });
  };

  const createUser = async (name: string, password: string) =>
    (await admin.json("POST", "/api/admin/users", { name, password, role: "user" }, 201)).id as string;

  test("a reset while the old password is being checked: no session made on it survives the reset", async () => {
    let password = "racer-password-0";
    const id = await createUser("racer", password);
    const survivors: number[] = [];
    // The login starts after the reset (whose own argon2 hash takes as long as the login's check)
    // and reads the account before the reset writes the new hash.
    for (const [i, delay] of [0, 30, 90].entries()) {
      const next = `racer-password-${i + 1}`;
      const reset = admin.json("POST", `/api/admin/users/${id}/password`, { password: next }, 204);
      await Bun.sleep(delay);
      const racer = new Session(server);
      const login = racer.login("racer", password);
      await reset;
      const res = await login;
      await res.arrayBuffer();
      if (res.status === 200 && (await racer.request("GET", "/api/admin/me")).status === 200) survivors.push(delay);
      expect([200, 401]).toContain(res.status);
      password = next;
    }
    expect(survivors).toEqual([]);
  });

  test("a stop while the password is being checked: the login is refused, and no session appears when the user is started again", async () => {
    const id = await createUser("stopper", "stopper-password");
    const racer = new Session(server);
    const login = racer.login("stopper", "stopper-password");
    await Bun.sleep(30);
    await setDisabled(id, true);
    const res = await login;
    await res.arrayBuffer();
    await setDisabled(id, false);
    if (res.status === 200) expect((await racer.request("GET", "/api/admin/me")).status).toBe(401);
    else expect(res.status).toBe(403);
  });

  test("a deletion while the password is being checked: 401, not a 500 from the session's foreign key", async () => {
    const id = await createUser("leaver", "leaver-password");
    const login = new Session(server).login("leaver", "leaver-password");
    await Bun.sleep(30);
    await admin.json("DELETE", `/api/admin/users/${id}`, undefined, 204);
    const res = await login;
    expect(res.status).toBe(401);
    expect(server.logs).not.toContain("FOREIGN KEY");
  });
});
