/**
 * Loaded before every test file (bunfig.toml `[test] preload`): the suite's environment, set in the
 * test process itself, so in-process contexts (`helpers/context.ts`, which creates the built-in admin)
 * and every Kura the helpers start (they pass `process.env` on) hash passwords with argon2id at its
 * least work (src/auth/passwords.ts): two hashes and three checks per admin session were over a
 * quarter of the suite's CPU. A variable already set is left as it is; a test of the real cost
 * passes `KURA_TEST_PASSWORD_COST: undefined` in its server's env (`http/hardening-login.test.ts`).
 */
process.env.KURA_TEST_PASSWORD_COST ??= "low";
