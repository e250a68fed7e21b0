/**
 * What every Kura the suite starts (server or command) gets over the test's own environment:
 * argon2id at its least work (src/auth/passwords.ts), as two hashes and three checks per admin
 * session were over a quarter of the suite's CPU. A test of the real cost passes
 * `KURA_TEST_PASSWORD_COST: undefined` in its env (`http/hardening-login.test.ts`).
 */
export const SUITE_ENV: Record<string, string> = { KURA_TEST_PASSWORD_COST: "low" };
