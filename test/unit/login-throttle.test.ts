/**
 * The login throttle's keys and its memory bound (src/auth/login-throttle.ts, src/auth/rate-limit.ts):
 * an IPv6 client counts as its /64, and address churn neither grows the buckets without bound nor
 * turns each attempt into a scan of all of them. Serial group: one case bounds wall time.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { clientKey, LoginThrottle } from "../../src/auth/login-throttle";
import { TokenBucketLimiter } from "../../src/auth/rate-limit";

const SEED = 20261127;

/** An address's eight groups written in one of the ways RFC 4291 allows. */
function formatIPv6(groups: number[], style: { zeros: boolean; upper: boolean; compress: boolean; quad: boolean }): string {
  let parts = groups.map((g) => g.toString(16).padStart(style.zeros ? 4 : 1, "0"));
  if (style.quad) {
    const [c, d] = [groups[6]!, groups[7]!];
    parts = [...parts.slice(0, 6), `${c >> 8}.${c & 255}.${d >> 8}.${d & 255}`];
  }
  let text = parts.join(":");
  if (style.compress) {
    // The longest run of zero groups (before any dotted quad) becomes "::".
    const limit = style.quad ? 6 : 8;
    let best = { at: -1, len: 0 };
    for (let i = 0; i < limit; ) {
      let j = i;
      while (j < limit && groups[j] === 0) j++;
      if (j - i > best.len) best = { at: i, len: j - i };
      i = j === i ? i + 1 : j;
    }
    if (best.len >= 2) text = `${parts.slice(0, best.at).join(":")}::${parts.slice(best.at + best.len).join(":")}`;
  }
  return style.upper ? text.toUpperCase() : text;
}

const group = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
const groups = fc.array(group, { minLength: 8, maxLength: 8 });
const style = fc.record({ zeros: fc.boolean(), upper: fc.boolean(), compress: fc.boolean(), quad: fc.boolean() });

describe("clientKey", () => {
  test("IPv4 addresses (also IPv4-mapped) count one by one", () => {
    expect(clientKey("203.0.113.7")).toBe("203.0.113.7");
    expect(clientKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(clientKey("203.0.113.8")).not.toBe(clientKey("203.0.113.7"));
  });

  test("any spelling of an IPv6 address gives its /64: the first four groups", () => {
    fc.assert(
      fc.property(groups, style, (g, s) => {
        // Not an IPv4-mapped address: those count as IPv4.
        fc.pre(!(g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff));
        expect(clientKey(formatIPv6(g, s))).toBe(
          `${g
            .slice(0, 4)
            .map((x) => x.toString(16))
            .join(":")}::/64`,
        );
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });

  test("two IPv6 addresses share a key exactly when they share the /64", () => {
    fc.assert(
      fc.property(groups, groups, fc.boolean(), style, style, (a, b, samePrefix, sa, sb) => {
        const other = samePrefix ? [...a.slice(0, 4), ...b.slice(4)] : b;
        fc.pre(![a, other].some((g) => g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff));
        const shared = a.slice(0, 4).every((x, i) => x === other[i]);
        expect(clientKey(formatIPv6(a, sa)) === clientKey(formatIPv6(other, sb))).toBe(shared);
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

describe("LoginThrottle", () => {
  test("addresses of one IPv6 /64 share the per-address budget (20), where IPv4 addresses do not", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    /** One failed attempt (its verification slot released at once), as the throttle saw it. */
    const attempt = (client: string, name: string) => {
      const admission = throttle.admitLogin(client, name);
      if (admission.ok) admission.release(false);
      return admission.ok ? "admitted" : admission.reason;
    };
    const fromV6 = Array.from({ length: 21 }, (_, i) => attempt(`2001:db8:1:2::${(i + 1).toString(16)}`, `user${i}`));
    expect(fromV6).toEqual([...Array(20).fill("admitted"), "rate"]);
    const fromV4 = Array.from({ length: 21 }, (_, i) => attempt(`198.51.100.${i + 1}`, `user${i}`));
    expect(fromV4).toEqual(Array(21).fill("admitted"));
  });

  test("a password change has the login's budget per account, and a correct old password gives its token back", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    for (let i = 0; i < 5; i++) {
      const admission = throttle.admitPasswordChange("u1");
      expect(admission.ok).toBe(true);
      if (admission.ok) admission.release(i === 4);
    }
    // Four failures and one success: one token left.
    const last = throttle.admitPasswordChange("u1");
    expect(last.ok).toBe(true);
    if (last.ok) last.release(false);
    expect(throttle.admitPasswordChange("u1")).toMatchObject({ ok: false, reason: "rate", retryAfter: 60 });
    // Another account is untouched.
    expect(throttle.admitPasswordChange("u2").ok).toBe(true);
  });
});

describe("TokenBucketLimiter under address churn", () => {
  test("never holds more than its bound, and the least recently used buckets go first", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(3, 100, () => now, 100);
    for (let i = 0; i < 3; i++) limiter.take("hot");
    expect(limiter.take("hot")).toBeGreaterThan(0);
    for (let i = 0; i < 1000; i++) {
      limiter.take(`churn-${i}`);
      if (i % 50 === 0) limiter.take("hot"); // still in use: stays drained, never forgotten
      expect(limiter.size).toBeLessThanOrEqual(100);
      now += 1;
    }
    expect(limiter.take("hot")).toBeGreaterThan(0);
  });

  test("200,000 attempts from fresh addresses take under 2 s in all (no scan per attempt)", () => {
    // Each new address leaves a bucket that is not full for 300 s, so a prune frees nothing: before,
    // every attempt past 10,000 buckets walked all of them (~1 ms each at 100k).
    const limiter = new TokenBucketLimiter(20, 15, () => 0);
    const started = performance.now();
    for (let i = 0; i < 200_000; i++) limiter.take(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    const elapsed = performance.now() - started;
    expect(limiter.size).toBeLessThanOrEqual(100_000);
    expect(elapsed).toBeLessThan(2_000);
  });
});
