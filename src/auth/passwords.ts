import type { Logger } from "../ops/log";

export const MIN_PASSWORD_LENGTH = 8;

/**
 * `KURA_TEST_PASSWORD_COST=low`, for the test suite's servers only: argon2id at its least work (8 KiB,
 * one pass) instead of Bun's defaults (64 MiB, two passes: ~0.3 s of a core per hash, 0.2 s per
 * check). Each admin session a test opens costs two hashes and three checks, over a quarter of
 * the suite's CPU; the algorithm, the stored format and every code path stay the same (as
 * Django's and Rails' test setups lower their hashers' cost). Hashes carry their own parameters,
 * so either kind verifies under either setting. A server started with it says so (WARN).
 */
const LOW_COST = process.env.KURA_TEST_PASSWORD_COST === "low";
const HASH_OPTIONS: Parameters<typeof Bun.password.hash>[1] = LOW_COST ? { algorithm: "argon2id", memoryCost: 8, timeCost: 1 } : { algorithm: "argon2id" };

/** The start-up WARN of a server whose new password hashes are test-weak. */
export function warnIfLowPasswordCost(log: Pick<Logger, "warn">) {
  if (LOW_COST) log.warn("仅供测试：KURA_TEST_PASSWORD_COST=low 使新密码的哈希强度降到最低，切勿在生产环境设置");
}

export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, HASH_OPTIONS);
}

// A real argon2id hash to verify against when the user does not exist, so that
// response time does not reveal which names exist.
let dummyHash: Promise<string> | undefined;

export async function verifyPassword(password: string, hash: string | undefined): Promise<boolean> {
  if (!hash) {
    dummyHash ??= hashPassword("kura-no-such-user");
    await Bun.password.verify(password, await dummyHash);
    return false;
  }
  return Bun.password.verify(password, hash);
}
