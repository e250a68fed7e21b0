import { TooMany } from "../../errors";
import { TokenBucketLimiter } from "../../auth/rate-limit";
import type { SettingsStore } from "../../config/settings";
import { once } from "../../shared/once";

/**
 * Upload admission: at most `max_concurrent_uploads` in flight, and per user at most
 * `upload_rate_per_min` (a token bucket with that burst). Both follow setting changes.
 * Unauthenticated form bodies have a pool of their own (`reserveFormKey`).
 */
export class UploadGate {
  private active = 0;
  private formKeyActive = 0;
  private readonly rate: TokenBucketLimiter;

  constructor(private readonly settings: SettingsStore) {
    const perMinute = settings.get().upload_rate_per_min;
    this.rate = new TokenBucketLimiter(perMinute, 60 / perMinute);
    settings.onChange((changed, next) => {
      if (changed.includes("upload_rate_per_min")) this.rate.resize(next.upload_rate_per_min, 60 / next.upload_rate_per_min);
    });
  }

  /** Returns a release function; throws 429 with Retry-After when full. */
  admit(userId: string): () => void {
    if (this.active >= this.settings.get().max_concurrent_uploads) {
      throw new TooMany("同时进行的上传过多，请稍后重试", 1);
    }
    const wait = this.rate.take(userId);
    if (wait > 0) throw new TooMany("上传过于频繁，请稍后重试", wait);
    this.active++;
    return once(() => this.active--);
  }

  /**
   * A slot of the separate pool for bodies read before anyone is known (Chevereto's key inside
   * the form): such a body takes none of the `max_concurrent_uploads` slots, so unauthenticated
   * clients that send a body slowly, or not at all, cannot keep authenticated uploads out. Once
   * the key has arrived and checks out, the upload takes an `admit` slot and gives this one back.
   * 429 when all are taken.
   */
  reserveFormKey(): () => void {
    if (this.formKeyActive >= formKeySlots(this.settings.get().max_concurrent_uploads)) {
      throw new TooMany("表单中带 key 的上传同时进行的过多，请稍后重试（把 key 放在请求头 X-API-Key 或查询参数 key 中则不受此限）", 1);
    }
    this.formKeyActive++;
    return once(() => this.formKeyActive--);
  }
}

/**
 * Size of the pool for unauthenticated form bodies: 4, or `max_concurrent_uploads` when that is
 * lower. Small, because a legitimate upload holds it only until its key field has been read
 * (ShareX sends the key before the file); only forms with the key after the file hold it longer.
 */
export const FORM_KEY_SLOTS = 4;
export const formKeySlots = (maxConcurrent: number) => Math.min(FORM_KEY_SLOTS, maxConcurrent);
