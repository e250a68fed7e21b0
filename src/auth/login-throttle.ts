import { TokenBucketLimiter } from "./rate-limit";

/** Per client address, across all names: enough for a shared office, not for a password spray. */
export const LOGIN_ADDRESS_BURST = 20;
export const LOGIN_ADDRESS_REFILL_SECONDS = 15;
/** argon2 verifications running at once, whoever asks (each costs ~100 ms of a core). */
export const MAX_CONCURRENT_PASSWORD_CHECKS = 4;

/** `release(verified)` ends the verification; a correct password gives the address its token back. */
export type LoginAdmission = { ok: true; release: (verified: boolean) => void } | { ok: false; retryAfter: number; reason: "rate" | "busy" };

/**
 * What a login attempt must pass before its password is verified: a bucket per client
 * address and user name, a bucket per client address alone (one address spraying many
 * names), and a cap on concurrent password verifications (many addresses at once).
 */
export class LoginThrottle {
  private readonly perName: TokenBucketLimiter;
  private readonly perAddress = new TokenBucketLimiter(LOGIN_ADDRESS_BURST, LOGIN_ADDRESS_REFILL_SECONDS);
  private readonly checks = new PasswordCheckSlots(MAX_CONCURRENT_PASSWORD_CHECKS);

  constructor(burst: number, refillSeconds: number) {
    this.perName = new TokenBucketLimiter(burst, refillSeconds);
  }

  admitLogin(client: string, name: string): LoginAdmission {
    const wait = Math.max(this.perAddress.take(client), this.perName.take(`${client}\0${name}`));
    if (wait > 0) return { ok: false, retryAfter: wait, reason: "rate" };
    const check = this.admitCheck();
    if (!check.ok) return check;
    return {
      ok: true,
      // Only failures count against the address: many people behind one NAT still get in.
      release: (verified) => {
        check.release(verified);
        if (verified) this.perAddress.refund(client);
      },
    };
  }

  /** A password verification outside login (changing one's password) shares the same slots. */
  admitCheck(): LoginAdmission {
    const release = this.checks.tryEnter();
    return release ? { ok: true, release: () => release() } : { ok: false, retryAfter: 1, reason: "busy" };
  }
}

class PasswordCheckSlots {
  private active = 0;
  constructor(private readonly max: number) {}

  tryEnter(): (() => void) | null {
    if (this.active >= this.max) return null;
    this.active++;
    let released = false;
    return () => {
      if (!released) this.active--;
      released = true;
    };
  }
}
