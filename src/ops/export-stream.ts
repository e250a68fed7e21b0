import { Database } from "bun:sqlite";
import { channelList } from "../channels/views";
import type { AppContext } from "../context";
import { UserRepo } from "../users/repo";

/**
 * The metadata export (spec 2.12, same document as export.ts builds in memory) as a
 * stream: read on its own read-only connection inside one transaction, so every section
 * comes from the same snapshot while uploads go on, and produced a chunk of rows per
 * pull, so memory holds one chunk rather than the library and the event loop serves
 * other requests between chunks. A slow client simply pulls less often.
 */
const ROWS_PER_CHUNK = 500;

type Row = Record<string, unknown>;

interface Section {
  name: string;
  sql: string;
  map?: (r: Row) => Row;
}

const SECTIONS: Section[] = [
  { name: "tokens", sql: "SELECT id, user_id, name, prefix, scopes, revoked_at, created_at FROM tokens ORDER BY id" },
  {
    // Upload order along the created_at index (rowid breaks ties): no sort of the whole table up front.
    name: "images",
    sql: `SELECT id, blob_id, user_id, token_id, file_name, object_key, expire_at, ttl_seconds, last_public_access_at,
                 access_count, pending_cleanup, cleanup_exempt, created_at FROM images ORDER BY created_at, rowid`,
    map: (r) => ({ ...r, pending_cleanup: !!r.pending_cleanup, cleanup_exempt: !!r.cleanup_exempt }),
  },
  {
    name: "blobs",
    sql: "SELECT id, sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, delete_after, created_at FROM blobs ORDER BY id",
    map: (r) => ({ ...r, pending_delete: !!r.pending_delete }),
  },
  { name: "blob_channels", sql: "SELECT blob_id, channel_id, state, attempts, last_error, updated_at FROM blob_channels ORDER BY blob_id, channel_id" },
];

function* exportChunks(app: AppContext, snap: Database): Generator<string> {
  // The first read pins the snapshot every later section is read from.
  const users = new UserRepo(snap).list();
  yield `{"users":${JSON.stringify(users)},"channels":${JSON.stringify(channelList(app).items)}`;
  for (const section of SECTIONS) {
    let buf = `,"${section.name}":[`;
    let first = true;
    let n = 0;
    for (const row of snap.query<Row, []>(section.sql).iterate()) {
      buf += (first ? "" : ",") + JSON.stringify(section.map ? section.map(row) : row);
      first = false;
      if (++n % ROWS_PER_CHUNK === 0) {
        yield buf;
        buf = "";
      }
    }
    yield buf + "]";
  }
  yield "}";
}

export function metadataExportStream(app: AppContext): ReadableStream<Uint8Array> {
  const snap = new Database(app.db.filename, { readonly: true, strict: true });
  snap.exec("PRAGMA busy_timeout = 5000");
  snap.exec("BEGIN");
  const chunks = exportChunks(app, snap);
  const encoder = new TextEncoder();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    chunks.return(undefined);
    snap.exec("ROLLBACK");
    snap.close();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        // One chunk per turn of the event loop: requests that arrived meanwhile go first,
        // even when the client reads as fast as the export can produce.
        await new Promise((resolve) => setImmediate(resolve));
        if (closed) return;
        try {
          const next = chunks.next();
          if (next.done) {
            close();
            controller.close();
          } else controller.enqueue(encoder.encode(next.value));
        } catch (err) {
          close();
          controller.error(err);
        }
      },
      cancel: close,
    },
    { highWaterMark: 1 },
  );
}
