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
    if (this.active >= this.settings.get().max_concurrent_uploads) {
      throw new TooMany("同时进行的上传过多，请稍后重试", 1);
    }
    const wait = this.rate.take(userId);
    if (wait > 0) throw new TooMany("上传过于频繁，请稍后重试", wait);
    this.active++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        this.active--;
      }
    };
  }
}
