import type { AppContext } from "../context";
import { indexFileNameBacklog } from "./repos/file-name-index";

/** Names indexed per transaction: ~5 µs each on 2 cores, so a full batch holds the loop ~5 ms. */
export const FILE_NAME_INDEX_BATCH = 1000;
/** How often the backlog is looked at when it was empty last time. */
export const FILE_NAME_INDEX_MS = 1000;
/** After a full batch the next follows soon: a burst of uploads is indexed in a few short steps. */
const CATCH_UP_MS = 50;

/**
 * The background half of file-name search: uploads only add their image to the backlog
 * (`images_fts_backlog`), and this moves the backlog into the FTS5 index a batch at a time.
 * Search reads the backlog directly, so how far behind this is changes speed, not results.
 */
export class FileNameIndexer {
  private behind = false;

  round(app: AppContext): number {
    const indexed = indexFileNameBacklog(app.db, FILE_NAME_INDEX_BATCH);
    this.behind = indexed === FILE_NAME_INDEX_BATCH;
    return indexed;
  }

  /** The wait before the next round. */
  delayMs(): number {
    return this.behind ? CATCH_UP_MS : FILE_NAME_INDEX_MS;
  }
}
