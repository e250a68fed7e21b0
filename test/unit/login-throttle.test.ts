/**
 * The login throttle's keys and its memory bound (src/auth/login-throttle.ts, src/auth/rate-limit.ts):
 * an IPv6 client counts as its /64, and address churn neither grows the buckets without bound nor
 * turns each attempt into a scan of all of them. Serial group: one case bounds wall time.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { clientKey, LoginThrottle } from "../../src/auth/login-throttle";
import { PRUNE_INTERVAL_MS, TokenBucketLimiter } from "../../src/auth/rate-limit";

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

describe("LoginThrottle: refunds and verification slots", () => {
  test("a correct password gives the address its token back: 25 good logins from one address under 25 names all pass", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const outcomes = Array.from({ length: 25 }, (_, i) => {
      const admission = throttle.admitLogin("198.51.100.9", `user${i}`);
      if (admission.ok) admission.release(true);
      return admission.ok;
    });
    expect(outcomes).toEqual(Array(25).fill(true));
  });

  test("a correct password gives the name its token back too: 12 good logins under one name pass, failures still count", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const attempt = (verified: boolean) => {
      const admission = throttle.admitLogin("198.51.100.11", "admin");
      if (admission.ok) admission.release(verified);
      return admission.ok;
    };
    expect(Array.from({ length: 12 }, () => attempt(true))).toEqual(Array(12).fill(true));
    // Five wrong passwords use the name's budget up; then even the right one waits.
    expect(Array.from({ length: 5 }, () => attempt(false))).toEqual(Array(5).fill(true));
    expect(throttle.admitLogin("198.51.100.11", "admin")).toMatchObject({ ok: false, reason: "rate" });
  });

  test("at most 4 verifications at once (busy, retry after 1 s); a release frees exactly one slot, however often it is called", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const held = Array.from({ length: 4 }, (_, i) => throttle.admitCheck(`client${i}`));
    expect(held.every((a) => a.ok)).toBe(true);
    expect(throttle.admitCheck("client9")).toEqual({ ok: false, retryAfter: 1, reason: "busy" });
    const first = held[0]!;
    if (first.ok) {
      first.release(false);
      first.release(false);
    }
    const again = throttle.admitCheck("client8");
    expect(again.ok).toBe(true);
    expect(throttle.admitCheck("client7")).toMatchObject({ ok: false, reason: "busy" });
    // A login while every slot is taken is busy too, not admitted.
    expect(throttle.admitLogin("198.51.100.10", "x")).toMatchObject({ ok: false, reason: "busy" });
  });
});

describe("LoginThrottle: one client cannot hold every verification slot", () => {
  test("an address holds at most 2 of the 4 slots, even with correct passwords (which cost no budget); others still get in", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const flood = Array.from({ length: 3 }, () => throttle.admitLogin("198.51.100.50", "mallory"));
    expect(flood.map((a) => a.ok)).toEqual([true, true, false]);
    expect(flood[2]).toMatchObject({ ok: false, reason: "busy" });
    const admin = throttle.admitLogin("198.51.100.60", "admin");
    expect(admin.ok).toBe(true);
    // A released slot is the address's to take again.
    if (flood[0]!.ok) flood[0]!.release(true);
    expect(throttle.admitLogin("198.51.100.50", "mallory").ok).toBe(true);
  });

  test("a login refused as busy costs no budget: five busy refusals, then the right password from the same address and name gets in", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const others = ["203.0.113.1", "203.0.113.1", "203.0.113.2", "203.0.113.2"].map((ip, i) => throttle.admitLogin(ip, `u${i}`));
    expect(others.every((a) => a.ok)).toBe(true);
    for (let i = 0; i < 5; i++) expect(throttle.admitLogin("198.51.100.60", "admin")).toMatchObject({ ok: false, reason: "busy" });
    for (const a of others) if (a.ok) a.release(true);
    const admin = throttle.admitLogin("198.51.100.60", "admin");
    expect(admin.ok).toBe(true);
  });

  test("a password change holds at most 2 slots per account, and a busy refusal costs it nothing", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    const changes = Array.from({ length: 3 }, () => throttle.admitPasswordChange("u1"));
    expect(changes.map((a) => (a.ok ? "ok" : a.reason))).toEqual(["ok", "ok", "busy"]);
    const spare = new LoginThrottle(5, 60, () => 0);
    const held = Array.from({ length: 4 }, (_, i) => spare.admitLogin(`192.0.2.${i}`, "x"));
    expect(held.every((a) => a.ok)).toBe(true);
    for (let i = 0; i < 6; i++) expect(spare.admitPasswordChange("u2")).toMatchObject({ ok: false, reason: "busy" });
    for (const a of held) if (a.ok) a.release(false);
    expect(spare.admitPasswordChange("u2").ok).toBe(true);
  });
});

describe("TokenBucketLimiter refills", () => {
  test("one token per refill period, counted from the last take (not from the epoch)", () => {
    let now = 1_700_000_000_000;
    const limiter = new TokenBucketLimiter(3, 10, () => now);
    expect([limiter.take("k"), limiter.take("k"), limiter.take("k")]).toEqual([0, 0, 0]);
    expect(limiter.take("k")).toBe(10);
    now += 5_000;
    expect(limiter.take("k")).toBe(5); // half a token back: 5 s to the next one
    now += 5_000;
    expect(limiter.take("k")).toBe(0);
    expect(limiter.take("k")).toBe(10);
  });

  test("a refund never lifts a bucket above its burst, and a refund of an unknown key creates nothing", () => {
    const limiter = new TokenBucketLimiter(2, 10, () => 0);
    limiter.refund("ghost");
    expect(limiter.size).toBe(0);
    limiter.take("k");
    limiter.refund("k");
    limiter.refund("k");
    expect([limiter.take("k"), limiter.take("k"), limiter.take("k")]).toEqual([0, 0, 10]);
  });

  test("a new burst keeps what each bucket has left: a raise adds the difference, a cut adds nothing (settings audit L3)", () => {
    const limiter = new TokenBucketLimiter(2, 30, () => 0);
    expect([limiter.take("u"), limiter.take("u")]).toEqual([0, 0]);
    expect(limiter.take("u")).toBeGreaterThan(0);
    limiter.resize(3, 20); // one more per burst: one more now
    expect(limiter.take("u")).toBe(0);
    expect(limiter.take("u")).toBeGreaterThan(0);
    limiter.resize(2, 30); // and back: nothing extra (a fresh limiter gave two more)
    expect(limiter.take("u")).toBeGreaterThan(0);
    expect(limiter.take("someone else")).toBe(0); // a user without a bucket starts full, at the new burst
    expect(limiter.take("someone else")).toBe(0);
    expect(limiter.take("someone else")).toBeGreaterThan(0);
  });

  test("full buckets are forgotten once the map outgrows the prune threshold (10,000), the others kept", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(2, 10, () => now);
    for (let i = 0; i < 10_000; i++) limiter.take(`old-${i}`);
    expect(limiter.size).toBe(10_000);
    now += 15_000; // every old bucket is full again (one token was taken, 1.5 came back)
    limiter.take("drained"); // the 10,001st bucket: the prune runs and keeps only this one (not full)
    expect(limiter.size).toBe(1);
    limiter.take("drained");
    expect(limiter.take("drained")).toBe(10); // its two tokens are gone: it was kept, not forgotten
  });

  test("after a prune the next one waits until the map has doubled (no scan per take)", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(2, 10, () => now);
    for (let i = 0; i < 10_001; i++) limiter.take(`k${i}`); // a prune at 10,001 frees nothing (none full)
    now += 15_000; // now all are full, so any prune would free them
    for (let i = 0; i < 5; i++) limiter.take(`m${i}`);
    expect(limiter.size).toBe(10_006); // no prune before 20,002 buckets
  });

  test("past the bound a tenth goes at once, least recently used first", () => {
    const limiter = new TokenBucketLimiter(3, 100, () => 0, 100);
    for (let i = 0; i < 100; i++) limiter.take(`k${i}`);
    expect(limiter.size).toBe(100);
    limiter.take("k0"); // used again: now the most recent
    limiter.take("k100");
    expect(limiter.size).toBe(90);
    // k0 survived, k1..k11 (the least recently used) went; k0 still has its bucket (two takes).
    expect(limiter.take("k0")).toBe(0);
    expect(limiter.take("k0")).toBe(100);
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

  test("after a flood the buckets that filled up again are dropped by a take ten minutes on, not kept for good", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(20, 15, () => now);
    // A flood past the bound: the map stays at it (the threshold that follows a prune is capped there).
    for (let i = 0; i < 250_000; i++) limiter.take(`flood-${i}`);
    expect(limiter.size).toBeLessThanOrEqual(100_000);
    expect(limiter.size).toBeGreaterThan(80_000);
    now += 301_000; // every flood bucket is full again after 300 s
    limiter.take("someone");
    expect(limiter.size).toBeGreaterThan(80_000); // not yet: no scan per take
    now += PRUNE_INTERVAL_MS;
    limiter.take("someone else");
    expect(limiter.size).toBeLessThanOrEqual(2);
  });

  test("at the bound, buckets that filled up again go before ones still counting (the prune threshold never exceeds the bound)", () => {
    let now = 0;
    const limiter = new TokenBucketLimiter(3, 10, () => now, 100);
    for (let i = 0; i < 3; i++) limiter.take("drained"); // empty, and the least recently used
    for (let i = 0; i < 99; i++) limiter.take(`old-${i}`);
    now += 20_000; // the old buckets are full again; "drained" has refilled 2 of 3
    limiter.take("new"); // the 101st: a prune runs first and frees the full ones, then nothing is evicted
    expect(limiter.size).toBe(2);
    expect(limiter.take("drained")).toBe(0);
    expect(limiter.take("drained")).toBe(0);
    expect(limiter.take("drained")).toBeGreaterThan(0);
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

describe("LoginThrottle under a spray of names", () => {
  test("one address trying 10,000 fresh names leaves per-name buckets only for the attempts its address budget let through", () => {
    const throttle = new LoginThrottle(5, 60, () => 0);
    let admitted = 0;
    for (let i = 0; i < 10_000; i++) {
      const admission = throttle.admitLogin("203.0.113.9", `名字-${i}-${"x".repeat(200)}`);
      if (admission.ok) {
        admitted++;
        admission.release(false);
      }
    }
    expect(admitted).toBe(20); // the address's burst
    expect(throttle.sizes).toEqual({ perName: 20, perAddress: 1 });
  });
});
