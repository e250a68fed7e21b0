import { isIPv6 } from "node:net";
import { normalizeAddress } from "../net/cidr";
import { TokenBucketLimiter } from "./rate-limit";
import { once } from "../shared/once";

/** Per client address, across all names: enough for a shared office, not for a password spray. */
export const LOGIN_ADDRESS_BURST = 20;
export const LOGIN_ADDRESS_REFILL_SECONDS = 15;
/** argon2 verifications running at once, whoever asks (each costs ~100 ms of a core). */
export const MAX_CONCURRENT_PASSWORD_CHECKS = 4;
/**
 * Of those, what one client address (or one account's password change) may hold: correct
 * passwords cost no budget, so anyone with an account could otherwise keep every slot busy from
 * one address with their own password and nobody else could log in.
 */
export const MAX_PASSWORD_CHECKS_PER_CLIENT = 2;

/** `release(verified)` ends the verification; a correct password gives the address its token back. */
export type LoginAdmission = { ok: true; release: (verified: boolean) => void } | { ok: false; retryAfter: number; reason: "rate" | "busy" };

/**
 * What a login attempt must pass before its password is verified: a bucket per client
 * address and user name, a bucket per client address alone (one address spraying many
 * names), and a cap on concurrent password verifications (many addresses at once).
 */
export class LoginThrottle {
  private readonly perName: TokenBucketLimiter;
  private readonly perAddress: TokenBucketLimiter;
  private readonly checks = new PasswordCheckSlots(MAX_CONCURRENT_PASSWORD_CHECKS);

  private readonly perAccount: TokenBucketLimiter;

  constructor(burst: number, refillSeconds: number, now: () => number = Date.now) {
    this.perName = new TokenBucketLimiter(burst, refillSeconds, now);
    this.perAccount = new TokenBucketLimiter(burst, refillSeconds, now);
    this.perAddress = new TokenBucketLimiter(LOGIN_ADDRESS_BURST, LOGIN_ADDRESS_REFILL_SECONDS, now);
  }

  admitLogin(client: string, name: string): LoginAdmission {
    const from = clientKey(client);
    // An address already refused leaves no per-name bucket: a spray of fresh names from one
    // address filled that map (one bucket per name, refused or not) to its bound.
    const addressWait = this.perAddress.take(from);
    // The name as a fixed-size digest: it is the client's text, up to 256 characters.
    const nameKey = `${from}\0${Bun.hash(name).toString(36)}`;
    const wait = addressWait > 0 ? addressWait : this.perName.take(nameKey);
    // Only failures count, against the address and the name alike: many people behind one NAT
    // still get in, and so does one person signing in on a few devices or tabs in a minute
    // (correct logins used up the name's 5 and the 6th got 429 despite the right password).
    return this.verifyUnless(wait, from, () => {
      this.perAddress.refund(from);
      this.perName.refund(nameKey);
    });
  }

  /** Buckets held per (address, name) and per address, for tests of the memory bound. */
  get sizes(): { perName: number; perAddress: number } {
    return { perName: this.perName.size, perAddress: this.perAddress.size };
  }

  /**
   * Changing one's password proves the old one: with a stolen session cookie (valid for weeks)
   * that check would otherwise be an unthrottled oracle for the plaintext password. So it has
   * the login's budget per account (wherever the requests come from), and a correct answer
   * gives its token back.
   */
  admitPasswordChange(userId: string): LoginAdmission {
    const key = `account\0${userId}`;
    return this.verifyUnless(this.perAccount.take(key), key, () => this.perAccount.refund(key));
  }

  /**
   * Refused while a bucket says `wait`; else a verification slot, and `refund` once a password was
   * right. A refusal for want of a slot gives the tokens back as well: nothing was tried, and a
   * busy minute otherwise emptied the buckets of people who never typed a wrong password.
   */
  private verifyUnless(wait: number, client: string, refund: () => void): LoginAdmission {
    if (wait > 0) return { ok: false, retryAfter: wait, reason: "rate" };
    const check = this.admitCheck(client);
    if (!check.ok) {
      refund();
      return check;
    }
    return {
      ok: true,
      release: (verified) => {
        check.release(verified);
        if (verified) refund();
      },
    };
  }

  /** A verification slot for `client` (see MAX_PASSWORD_CHECKS_PER_CLIENT). */
  admitCheck(client: string): LoginAdmission {
    const release = this.checks.tryEnter(client);
    return release ? { ok: true, release: () => release() } : { ok: false, retryAfter: 1, reason: "busy" };
  }
}

class PasswordCheckSlots {
  private active = 0;
  /** Slots held per client; a client's entry goes with its last slot, so the map stays at most `max` long. */
  private readonly byClient = new Map<string, number>();
  constructor(
    private readonly max: number,
    private readonly perClient = MAX_PASSWORD_CHECKS_PER_CLIENT,
  ) {}

  tryEnter(client: string): (() => void) | null {
    const held = this.byClient.get(client) ?? 0;
    if (this.active >= this.max || held >= this.perClient) return null;
    this.active++;
    this.byClient.set(client, held + 1);
    return once(() => {
      this.active--;
      const left = (this.byClient.get(client) ?? 1) - 1;
      if (left > 0) this.byClient.set(client, left);
      else this.byClient.delete(client);
    });
  }
}

/**
 * The key a client's attempts count under. An IPv6 client counts as its /64: one host usually
 * has a whole /64 to itself, so per-address buckets would give it 2^64 fresh budgets.
 */
export function clientKey(client: string): string {
  const address = normalizeAddress(client);
  if (!isIPv6(address)) return address;
  return `${ipv6Groups(address).slice(0, 4).join(":")}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address, as lowercase hex without leading zeros. */
function ipv6Groups(address: string): string[] {
  let text = address.toLowerCase();
  // A trailing dotted quad (64:ff9b::1.2.3.4) is the last two groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const front = head ? head.split(":") : [];
  const back = tail ? tail.split(":") : [];
  const groups = tail === undefined ? front : [...front, ...Array(8 - front.length - back.length).fill("0"), ...back];
  return groups.map((g) => Number.parseInt(g, 16).toString(16));
}
