import { channelList } from "../channels/views";
import type { AppContext } from "../context";
import { inlineWorker, onWorkerDeath } from "../shared/inline-worker";
import { USER_ITEM_SQL } from "../users/repo";
import { EXPORT_SQL, SNAPSHOT_PIN_SQL } from "./repos/export";

/**
 * The metadata export (spec 2.12, the same document export.ts builds in memory) as a
 * stream. A Bun Worker reads it on its own read-only connection inside one transaction,
 * so every section comes from one snapshot while uploads go on, and SQLite's page reads
 * (synchronous, and slow on a busy disk) never run on the event loop. The worker makes
 * one chunk of rows per request, and the stream requests the next only when the client
 * has taken the last: memory holds a chunk, not the library.
 */
const ROWS_PER_CHUNK = 500;

interface Section {
  name: string;
  sql: string;
  /** Integer 0/1 columns the document shows as booleans. */
  booleans: string[];
}

const SECTIONS: Section[] = [
  { name: "users", sql: `${USER_ITEM_SQL} ORDER BY u.created_at, u.id`, booleans: ["disabled"] },
  { name: "tokens", sql: EXPORT_SQL.tokens, booleans: [] },
  { name: "images", sql: EXPORT_SQL.images, booleans: ["pending_cleanup", "cleanup_exempt"] },
  { name: "blobs", sql: EXPORT_SQL.blobs, booleans: ["pending_delete"] },
  { name: "blob_channels", sql: EXPORT_SQL.blob_channels, booleans: [] },
];

/** Runs in the worker: `start` opens the snapshot, each `next` answers one chunk, `done` at the end. */
const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let chunks;
let db;
function* generate(sections, channelsJson, rowsPerChunk) {
  let first = true;
  for (const section of sections) {
    let buf = (first ? "{" : ",") + JSON.stringify(section.name) + ":[";
    first = false;
    let n = 0;
    for (const row of db.query(section.sql).iterate()) {
      for (const b of section.booleans) row[b] = !!row[b];
      buf += (n ? "," : "") + JSON.stringify(row);
      if (++n % rowsPerChunk === 0) {
        yield buf;
        buf = "";
      }
    }
    buf += "]";
    // Channels come from the running registry (health is not in the database), right after users.
    if (section.name === "users") buf += ',"channels":' + channelsJson;
    yield buf;
  }
  yield "}";
}
self.onmessage = (event) => {
  const msg = event.data;
  try {
    if (msg.type === "start") {
      db = new Database(msg.path, { readonly: true });
      db.run("PRAGMA busy_timeout = 5000");
      db.run("BEGIN");
      // The first read pins the snapshot: everything after comes from this moment.
      db.query(${JSON.stringify(SNAPSHOT_PIN_SQL)}).get();
      chunks = generate(msg.sections, msg.channelsJson, msg.rowsPerChunk);
      postMessage({ type: "ready" });
    } else if (msg.type === "stop") {
      // A cancelled download: release the snapshot before the worker goes.
      if (db) {
        try { db.run("ROLLBACK"); } catch {}
        db.close();
      }
      self.close();
    } else if (msg.type === "next") {
      const next = chunks.next();
      if (next.done) {
        db.run("ROLLBACK");
        db.close();
        postMessage({ type: "done" });
      } else postMessage({ type: "chunk", text: next.value });
    }
  } catch (err) {
    postMessage({ type: "error", error: String((err && err.message) || err) });
  }
};`;

export function metadataExportStream(app: AppContext): ReadableStream<Uint8Array> {
  const worker = inlineWorker(WORKER_SOURCE);
  const encoder = new TextEncoder();
  let waiting: { resolve: (m: { type: string; text?: string; error?: string }) => void } | undefined;
  let closed = false;
  worker.onmessage = (event: MessageEvent<{ type: string; text?: string; error?: string }>) => waiting?.resolve(event.data);
  let death: string | undefined;
  onWorkerDeath(worker, (reason) => {
    death ??= reason;
    waiting?.resolve({ type: "error", error: reason });
  });
  const ask = (message: unknown) =>
    new Promise<{ type: string; text?: string; error?: string }>((resolve) => {
      if (death) return resolve({ type: "error", error: death });
      waiting = { resolve };
      worker.postMessage(message);
    });
  let finished = false;
  const close = () => {
    if (closed) return;
    closed = true;
    if (finished) worker.terminate();
    else worker.postMessage({ type: "stop" });
  };
  const started = ask({
    type: "start",
    path: app.db.filename,
    sections: SECTIONS,
    channelsJson: JSON.stringify(channelList(app).items),
    rowsPerChunk: ROWS_PER_CHUNK,
  });
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const ready = await started;
        const reply = ready.type === "ready" ? await ask({ type: "next" }) : ready;
        if (closed) return;
        if (reply.type === "chunk") controller.enqueue(encoder.encode(reply.text));
        else if (reply.type === "done") {
          finished = true;
          close();
          controller.close();
        } else {
          close();
          controller.error(new Error(reply.error ?? "导出失败"));
        }
      },
      cancel: close,
    },
    { highWaterMark: 1 },
  );
}
