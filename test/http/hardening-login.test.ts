import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import type { KuraServer } from "../helpers/server";

/** A login attempt as seen from `client` (the test process is a trusted proxy). */
function attempt(server: KuraServer, client: string, name: string): Promise<Response> {
  return fetch(server.url("/api/admin/auth/login"), {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": client },
    body: JSON.stringify({ name, password: "wrong-password" }),
  });
}

describe("row 4: login throttling beyond address + name", () => {
  // The real argon2id cost (the suite's servers run at its least work): the cap on verifications
  // at once is met only when each one takes its real time.
  const { server } = useServer({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1/32", KURA_TEST_PASSWORD_COST: undefined } });

  test("passwords are stored as argon2id at 64 MiB and two passes, and no test-weak WARN is logged", async () => {
    await adminSession(server);
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    try {
      const hashes = db.query<{ password_hash: string }, []>("SELECT password_hash FROM users").all();
      expect(hashes.map((h) => h.password_hash.split("$").slice(1, 4).join("$"))).toEqual(["argon2id$v=19$m=65536,t=2,p=1"]);
    } finally {
      db.close();
    }
    expect(server.logs).not.toMatch(/KURA_TEST_PASSWORD_COST/);
  });

  test("one address spraying passwords over 25 names is throttled", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++) statuses.push((await attempt(server, "203.0.113.7", `name-${i}`)).status);
    expect(statuses.slice(0, 5)).toEqual(Array(5).fill(401));
    expect(statuses).toContain(429);
    const last = await attempt(server, "203.0.113.7", "yet-another-name");
    expect(last.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(await expectError(last, 429)).toMatch(/过于频繁/);
    // Another address is unaffected.
    expect((await attempt(server, "203.0.113.8", "name-0")).status).toBe(401);
  });

  test("password verifications from many addresses at once are capped", async () => {
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => attempt(server, `198.51.100.${i + 1}`, `user-${i}`)));
    const statuses = answers.map((r) => r.status);
    // Every address and name is fresh: a 429 here can only come from the concurrency cap.
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    const busy = answers[statuses.indexOf(429)]!;
    expect(await expectError(busy, 429)).toMatch(/繁忙/);
    await Promise.all(answers.filter((r) => r !== busy).map((r) => r.arrayBuffer()));
  });
});
