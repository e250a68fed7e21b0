/**
 * The channel drivers' HTTP deadlines (src/channels/drivers/http-transport.ts): one for the
 * headers, then one for each silence in the body, never one for the whole download.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { BodyStalledError, fetchWithTimeout } from "../../src/channels/drivers/http-transport";

const TIMEOUT_MS = 300;

/** Bodies by path: a byte every `gapMs` for `pieces` pieces; `stall` sends one piece, then nothing. */
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  idleTimeout: 0,
  fetch(req) {
    const url = new URL(req.url);
    const gapMs = Number(url.searchParams.get("gap") ?? 0);
    const pieces = Number(url.searchParams.get("pieces") ?? 1);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(out) {
        if (url.pathname === "/stall" && sent === 1) return new Promise<void>(() => {}); // never again
        if (sent > 0) await Bun.sleep(gapMs);
        out.enqueue(new Uint8Array([65 + (sent % 26)]));
        if (++sent === pieces) out.close();
      },
    });
    if (url.pathname === "/empty") return new Response(null, { status: 204 });
    return new Response(body);
  },
});
afterAll(() => server.stop(true));

const get = (path: string) => fetchWithTimeout(fetch, `http://127.0.0.1:${server.port}${path}`, { method: "GET", headers: new Headers() }, TIMEOUT_MS);

async function timedText(res: Response): Promise<{ text: string | Error; ms: number }> {
  const t = performance.now();
  const text = await res.text().catch((err: Error) => err);
  return { text, ms: performance.now() - t };
}

describe("fetchWithTimeout", () => {
  test("a download longer than the timeout arrives whole while the peer keeps sending", async () => {
    const { text, ms } = await timedText(await get(`/trickle?gap=${TIMEOUT_MS / 3}&pieces=10`));
    expect(text).toBe("ABCDEFGHIJ");
    expect(ms).toBeGreaterThan(2 * TIMEOUT_MS); // longer than one deadline in all
  });

  test("a body that goes silent fails after one idle deadline, with a Chinese reason", async () => {
    const { text, ms } = await timedText(await get("/stall?pieces=5"));
    expect(text).toBeInstanceOf(BodyStalledError);
    expect((text as Error).message).toBe(`读取响应超时：${TIMEOUT_MS / 1000} 秒未收到数据`);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(ms).toBeLessThan(TIMEOUT_MS + 1_000);
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
