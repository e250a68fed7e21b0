import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { Session } from "../helpers/client";
import type { KuraServer } from "../helpers/server";

export const SENTINEL = "__kura_secret_keep__";

/** Polls `read` until `ok` holds; returns the last value. */
export async function waitFor<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await Bun.sleep(100);
  }
}

export interface Replica {
  channel_id: number;
  channel_name: string;
  state: string;
  last_error: string;
  attempts: number;
}

/** The image's replica on one channel, as the image detail reports it. */
export async function replicaOn(admin: Session, imageId: string, channelId: number): Promise<Replica | undefined> {
  const detail = await admin.json("GET", `/api/admin/images/${imageId}`);
  return (detail.replicas as Replica[]).find((r) => r.channel_id === channelId);
}

export async function waitReplicaState(admin: Session, imageId: string, channelId: number, state: string, timeoutMs = 15_000) {
  return waitFor(
    () => replicaOn(admin, imageId, channelId),
    (r) => r?.state === state,
    timeoutMs,
    `replica of ${imageId} on ${channelId} to be ${state}`,
  );
}

/** Waits until the image has `count` replicas and every one of them is done (no copy still in flight). */
export async function waitAllReplicasDone(admin: Session, imageId: string, count: number, timeoutMs = 15_000) {
  return waitFor(
    async () => (await admin.json("GET", `/api/admin/images/${imageId}`)).replicas as Replica[],
    (replicas) => replicas.length === count && replicas.every((r) => r.state === "done"),
    timeoutMs,
    `every replica of ${imageId} to be done`,
  );
}

/** Reads the server's database directly (read-only) for rows the API does not show yet (audit, alerts). */
export function queryDb<T>(server: KuraServer, sql: string, ...args: (string | number)[]): T[] {
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query(sql).all(...args) as T[];
  } finally {
    db.close();
  }
}
