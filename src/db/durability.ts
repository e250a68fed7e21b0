/**
 * Answers to writes are durable. The main connection commits with `synchronous = NORMAL`: a
 * COMMIT writes its WAL frames without an fsync, so the event loop never waits for the disk. On
 * its own that lets a power loss, a kernel crash or a file system turned read-only after an error
 * drop the last commits, which would include an upload whose URL the client already has (its
 * file, synced by the channel, then an orphan) or a delete it was told is done.
 *
 * So before a write request is answered, the WAL file is fsync'd in Bun's thread pool, off the loop.
 * One fsync covers every commit before it started, so requests finishing together share one, and
 * a request that wrote nothing (the connection's change counter did not move) waits for none.
 * A checkpoint copies frames into the database file and syncs it before the WAL starts over, so
 * a synced WAL (whatever it holds by then) is enough.
 */
import type { Database } from "bun:sqlite";
import { type FileHandle, open } from "node:fs/promises";

/**
 * Every WAL handle opened, held for the process's life: a FileHandle that is garbage-collected
 * open is an error in Bun (thrown into whatever runs next). The service has one; tests that build
 * and drop contexts in-process keep theirs here instead of failing a random later test.
 */
const walHandles = new Set<FileHandle>();

export class WalDurability {
  readonly #changes: () => number;
  readonly #walPath: string;
  #wal: FileHandle | undefined;
  /** The change counter when the last successful fsync began: everything up to it is durable. */
  #durableThrough: number;
  #inflight: { through: number; done: Promise<void> } | undefined;

  readonly #syncWal: () => Promise<void>;

  /** `syncWal` replaces the fsync of the WAL file (tests hold it to see which barrier waits for which). */
  constructor(db: Database, syncWal?: () => Promise<void>) {
    const total = db.query<{ n: number }, []>("SELECT total_changes() AS n");
    this.#changes = () => total.get()!.n;
    this.#walPath = `${db.filename}-wal`;
    this.#durableThrough = this.#changes();
    this.#syncWal = syncWal ?? (() => this.#fsyncWal());
  }

  /** Resolves once every commit made so far on the connection is on disk; rejects if the fsync failed. */
  async barrier(): Promise<void> {
    const needed = this.#changes();
    for (;;) {
      if (needed <= this.#durableThrough) return;
      const inflight = this.#inflight;
      if (!inflight) return this.#sync().done;
      // A sync that began after these commits covers them; an older one may not: wait for it, then look again.
      if (inflight.through >= needed) return inflight.done;
      await inflight.done.catch(() => {});
    }
  }

  #sync() {
    const through = this.#changes();
    const done = Promise.resolve()
      .then(this.#syncWal)
      .then(() => {
        this.#durableThrough = Math.max(this.#durableThrough, through);
      });
    const inflight = { through, done };
    this.#inflight = inflight;
    const clear = () => {
      if (this.#inflight === inflight) this.#inflight = undefined;
    };
    done.then(clear, clear);
    return inflight;
  }

  async #fsyncWal(): Promise<void> {
    if (this.#wal === undefined) {
      // The WAL exists from the connection's first transaction on; a read-only descriptor can fsync it.
      try {
        this.#wal = await open(this.#walPath, "r");
        walHandles.add(this.#wal);
      } catch (err) {
        // No WAL yet: no commit is waiting in one.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
        throw err;
      }
    }
    // Through fs/promises, not fs.fsync: the latter waits on the libuv pool, which sharp's renders
    // hold for their whole length, and every write's answer waited for a cold render (98 s for an
    // 8 KB upload behind two AVIF encodes; shared/file-writable.ts).
    await this.#wal.sync();
  }
}
