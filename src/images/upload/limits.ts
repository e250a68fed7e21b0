import { TooMany } from "../../errors";
import { TokenBucketLimiter } from "../../auth/rate-limit";
import type { SettingsStore } from "../../config/settings";

/**
 * Upload admission: at most `max_concurrent_uploads` in flight, and per user at most
 * `upload_rate_per_min` (a token bucket with that burst). Both follow setting changes.
 */
export class UploadGate {
  private active = 0;
  private rate: TokenBucketLimiter;

  constructor(private readonly settings: SettingsStore) {
    this.rate = this.makeLimiter();
    settings.onChange((changed) => {
      if (changed.includes("upload_rate_per_min")) this.rate = this.makeLimiter();
    });
  }

  private makeLimiter() {
    const perMinute = this.settings.get().upload_rate_per_min;
    return new TokenBucketLimiter(perMinute, 60 / perMinute);
  }

  /** Returns a release function; throws 429 with Retry-After when full. */
  admit(userId: string): () => void {
    return this.admitReserved(userId, this.reserve());
  }

  /**
   * A concurrency slot alone (429 when full), for a body that has to be read before its
   * user is known (Chevereto's key inside the form); `admitReserved` adds the user's rate.
   */
  reserve(): () => void {
    if (this.active >= this.settings.get().max_concurrent_uploads) {
      throw new TooMany("同时进行的上传过多，请稍后重试", 1);
    }
    this.active++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        this.active--;
      }
    };
  }

  /** The per-user rate check for an upload already holding a slot; the slot is freed when refused. */
  admitReserved(userId: string, release: () => void): () => void {
    const wait = this.rate.take(userId);
    if (wait > 0) {
      release();
      throw new TooMany("上传过于频繁，请稍后重试", wait);
    }
    return release;
  }
}
