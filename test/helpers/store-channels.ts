/**
 * Recording channels in place of the registry's, for storeReference and resolveUploadIntents run
 * in-process on the real application context (fast enough to judge every mutant of
 * `bun run mutate upload-store`). Each channel keeps its objects in memory and records its puts
 * and deletes; a put may be held on a gate or made to fail, like a slow or broken remote.
 */
import { expect } from "bun:test";
import { createHash } from "node:crypto";
import type { AppContext } from "../../src/context";
import { sqlTime } from "../../src/db/time";
import { asApiError } from "../../src/http/errors";

export interface FakeChannel {
  row: { id: number; name: string; deleting: number };
  healthy: boolean;
  objects: Map<string, Uint8Array>;
  puts: string[];
  deletes: string[];
  failPut?: boolean;
  /** Thrown by the next puts instead of the generic failure (a full disk, say). */
  putError?: unknown;
  failDelete?: boolean;
  /** Runs as a put starts, before its gate. */
  onPut?: (key: string) => void;
  /** A put waits for this before it writes (a slow remote). */
  gate?: Promise<unknown>;
  driver: { put(key: string, body: Uint8Array | ReadableStream<Uint8Array>, size: number): Promise<void>; delete(key: string): Promise<void> };
}

function fakeChannel(id: number, name: string): FakeChannel {
  const ch: FakeChannel = {
    row: { id, name, deleting: 0 },
    healthy: true,
    objects: new Map(),
    puts: [],
    deletes: [],
    driver: {
      async put(key, body, size) {
        ch.puts.push(key);
        ch.onPut?.(key);
        await ch.gate;
        if (ch.putError !== undefined) throw ch.putError;
        if (ch.failPut) throw new Error("写入失败（测试）");
        const bytes = body instanceof Uint8Array ? body : new Uint8Array(await new Response(body).arrayBuffer());
        expect(bytes.length).toBe(size);
        ch.objects.set(key, bytes);
      },
      async delete(key) {
        ch.deletes.push(key);
        if (ch.failDelete) throw new Error("删除失败（测试）");
        ch.objects.delete(key);
      },
    },
  };
  return ch;
}

/** Adds a channel row per name (`fake-<name>`) and makes the registry's writes, lists and lookups use their fakes. */
export function installFakeChannels(app: AppContext, names: string[]): FakeChannel[] {
  const channels = names.map((name) => {
    const r = app.db
      .query("INSERT INTO channels (name, driver, config_sealed, bound_at, created_at) VALUES (?, 'local', '{}', ?, ?)")
      .run(`fake-${name}`, sqlTime(), sqlTime());
    return fakeChannel(Number(r.lastInsertRowid), `fake-${name}`);
  });
  const registry = app.channels as unknown as Record<string, unknown>;
  registry.writable = () => channels.filter((c) => c.healthy && !c.row.deleting);
  registry.list = () => channels;
  registry.get = (id: number) => channels.find((c) => c.row.id === id);
  // Like the registry with a driver that does not stage writes: nothing is written before the intent commits.
  registry.put = async (ch: FakeChannel, key: string, body: Uint8Array, size: number, publishAfter?: Promise<unknown>) => {
    await publishAfter;
    return ch.driver.put(key, body, size);
  };
  return channels;
}

/** Back to healthy, in service and recording afresh. */
export function resetFakeChannels(channels: FakeChannel[]) {
  for (const c of channels) {
    Object.assign(c, { healthy: true, failPut: false, putError: undefined, failDelete: false, onPut: undefined, gate: undefined, puts: [], deletes: [] });
    c.row.deleting = 0;
  }
}

let seed = 0;

/** A prepared upload of `size` bytes no earlier call made (its dimensions already checked). */
export function preparedUpload(size = 100) {
  const bytes = Buffer.from(new Uint8Array(size).map((_, i) => (i * 13 + ++seed) & 0xff));
  return {
    bytes,
    size,
    sha256: createHash("sha256").update(bytes).digest("hex"),
    mime: "image/png",
    ext: "png",
    dimensions: Promise.resolve({ width: 10, height: 10 }),
  };
}

export const uploadRef = (over: Record<string, unknown> = {}) => ({
  userId: "default",
  tokenId: null,
  fileName: "x.png",
  objectKey: null,
  ttlSeconds: null,
  ...over,
});

/** "stored", or the API error as `status:message` (`other:message` for anything else). */
export const storeOutcome = (p: Promise<unknown>) =>
  p.then(
    () => "stored",
    (e) => {
      const api = asApiError(e);
      return api ? `${api.status}:${api.message}` : `other:${e instanceof Error ? e.message : String(e)}`;
    },
  );
