import type { ImageRepo, ImageView } from "../images/repo";

/** How long a looked-up image row may be reused without asking the database again. */
export const LOOKUP_TTL_MS = 2_000;
const MAX_ENTRIES = 20_000;

/** What was forgotten: an image row, or an alias (user id, object key). */
export type LookupChange = { image?: string; alias?: [string, string] };

/**
 * Memoized delivery lookups (image row by id or alias) so a hot image does not cost a
 * SQLite join per request. Changes made through the API (delete, PATCH, alias
 * re-point) forget their entries at once; anything else is at most LOOKUP_TTL_MS stale,
 * and expiry is still judged per request from `expire_at`.
 */
export class DeliveryLookups {
  private readonly views = new Map<string, { view: ImageView; at: number }>();
  private readonly aliases = new Map<string, { id: string; at: number }>();
  /** Told of every forget (the delivery threads keep lookups of their own, the warm-answer memos build on these). */
  private readonly watchers: ((change: LookupChange) => void)[] = [];

  constructor(
    private readonly images: ImageRepo,
    private readonly now: () => number = Date.now,
  ) {}

  byId(id: string): ImageView | undefined {
    const hit = this.views.get(id);
    if (hit && this.now() - hit.at < LOOKUP_TTL_MS) return hit.view;
    const view = this.images.view(id);
    if (view) this.remember(this.views, id, { view, at: this.now() });
    else this.views.delete(id);
    return view;
  }

  byAlias(userId: string, objectKey: string): ImageView | undefined {
    const key = `${userId}\0${objectKey}`;
    const hit = this.aliases.get(key);
    if (hit && this.now() - hit.at < LOOKUP_TTL_MS) {
      const view = this.byId(hit.id);
      if (view && view.object_key === objectKey && view.user_id === userId) return view;
    }
    const view = this.images.byObjectKey(userId, objectKey);
    if (view) {
      this.remember(this.aliases, key, { id: view.id, at: this.now() });
      this.remember(this.views, view.id, { view, at: this.now() });
    } else this.aliases.delete(key);
    return view;
  }

  /** An image changed or is gone. */
  forget(id: string) {
    this.views.delete(id);
    for (const watcher of this.watchers) watcher({ image: id });
  }

  /** An alias was re-pointed. */
  forgetAlias(userId: string, objectKey: string) {
    this.aliases.delete(`${userId}\0${objectKey}`);
    for (const watcher of this.watchers) watcher({ alias: [userId, objectKey] });
  }

  watch(watcher: (change: LookupChange) => void) {
    this.watchers.push(watcher);
  }

  /** Date.now() from which the cached row of `id` is read again (now, when none is cached). */
  freshUntil(id: string): number {
    const hit = this.views.get(id);
    return hit ? hit.at + LOOKUP_TTL_MS : this.now();
  }

  private remember<V>(map: Map<string, V>, key: string, value: V) {
    map.delete(key);
    map.set(key, value);
    if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value!);
  }
}
