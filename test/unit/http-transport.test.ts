/**
 * The channel drivers' HTTP deadlines (src/channels/drivers/http-transport.ts): one for the
 * headers, then one for each silence in the body, never one for the whole download.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { BodyStalledError, fetchWithTimeout } from "../../src/channels/drivers/http-transport";
import { waitFor } from "../http/channels.helpers";

const TIMEOUT_MS = 300;

/** Requests (by their `id`) whose bodies the peer stopped sending because the reader went away. */
const cancelled = new Set<string>();

/**
 * Answers by path. Bodies are a byte every `gap` ms for `pieces` pieces; `/stall` sends one
 * piece, then nothing; `/late` sends its headers only after twice the timeout.
 */
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  idleTimeout: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const gapMs = Number(url.searchParams.get("gap") ?? 0);
    const pieces = Number(url.searchParams.get("pieces") ?? 1);
    if (url.pathname === "/empty") return new Response(null, { status: 204 });
    if (url.pathname === "/late") await Bun.sleep(2 * TIMEOUT_MS);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(out) {
        if (url.pathname === "/stall" && sent === 1) return new Promise<void>(() => {}); // never again
        if (sent > 0) await Bun.sleep(gapMs);
        out.enqueue(new Uint8Array([65 + (sent % 26)]));
        if (++sent === pieces) out.close();
      },
      cancel() {
        cancelled.add(url.searchParams.get("id") ?? "");
      },
    });
    return new Response(body, { status: 206, headers: { "x-peer": "kept", "content-range": "bytes 0-0/1" } });
  },
});
afterAll(() => server.stop(true));

const get = (path: string, timeoutMs = TIMEOUT_MS) =>
  fetchWithTimeout(fetch, `http://127.0.0.1:${server.port}${path}`, { method: "GET", headers: new Headers() }, timeoutMs);

async function timed<T>(work: () => Promise<T>): Promise<{ value: T | Error; ms: number }> {
  const t = performance.now();
  const value = await work().catch((err: Error) => err);
  return { value, ms: performance.now() - t };
}

const peerLetGo = (id: string) =>
  waitFor(
    async () => cancelled.has(id),
    (gone) => gone,
    5_000,
    `the peer to see connection ${id} closed`,
  );

describe("fetchWithTimeout", () => {
  test("a download longer than the timeout arrives whole while the peer keeps sending; status and headers are the peer's", async () => {
    // Gaps of 100 ms under a 700 ms idle deadline: a loaded CI machine that stalls this process
    // for a few hundred milliseconds must not look like a silent peer (it did at 300 ms).
    const idleMs = 700;
    const res = await get("/trickle?gap=100&pieces=20", idleMs);
    expect(res.status).toBe(206);
    expect(res.headers.get("x-peer")).toBe("kept");
    expect(res.headers.get("content-range")).toBe("bytes 0-0/1");
    const { value, ms } = await timed(() => res.text());
    expect(value).toBe("ABCDEFGHIJKLMNOPQRST");
    expect(ms).toBeGreaterThan(2 * idleMs); // longer than two deadlines in all
  });

  test("headers that do not come within the timeout fail the request", async () => {
    const { value, ms } = await timed(() => get("/late"));
    expect(value).toBeInstanceOf(Error);
    expect((value as Error).name).toBe("TimeoutError"); // the headers would have come at 2 × TIMEOUT_MS
    expect(ms).toBeLessThan(TIMEOUT_MS + 1_000);
  });

  test("a body that goes silent fails after one idle deadline, with a Chinese reason, and frees the connection", async () => {
    const res = await get("/stall?pieces=5&id=stall");
    const { value, ms } = await timed(() => res.text());
    expect(value).toBeInstanceOf(BodyStalledError);
    expect((value as Error).message).toBe(`读取响应超时：${TIMEOUT_MS / 1000} 秒未收到数据`);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(ms).toBeLessThan(TIMEOUT_MS + 1_000);
    await peerLetGo("stall");
  });

  test("a reader that stops early frees the connection too", async () => {
    const res = await get(`/long?gap=${TIMEOUT_MS / 3}&pieces=1000&id=early`);
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    await peerLetGo("early");
  });

  test("a slow reader is not timed: only waits on the peer count", async () => {
    const res = await get("/all?pieces=3");
    const reader = res.body!.getReader();
    const parts: number[] = [];
    for (;;) {
      await Bun.sleep(TIMEOUT_MS * 1.5); // the reader dawdles longer than the deadline between reads
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(...value);
    }
    expect(Buffer.from(parts).toString()).toBe("ABC");
  });

  test("bodiless answers pass through untouched", async () => {
    const res = await get("/empty");
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
  });
});
