/**
 * Small request bodies (JSON, forms) read before routing (src/http/body-limit.ts): the 1 MiB cap,
 * the memory budget shared by all requests and per client address, the deadline for a body to
 * arrive whole, and the budget given back on every path.
 */
import { describe, expect, test } from "bun:test";
import { BodyBudget, boundSmallBody, MAX_BODY_BYTES } from "../../src/http/body-limit";

const post = (body: BodyInit | null, headers: Record<string, string> = {}) =>
  new Request("http://kura.test/api/auth/login", { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
/** A body that sends `chunks` and then, unless `end`, never finishes. */
function trickle(chunks: Uint8Array[], end = true): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++]!);
      else if (end) c.close();
      else return new Promise(() => {});
    },
  });
}
const streamed = (chunks: Uint8Array[], end = true) => post(trickle(chunks, end));
async function answer(r: Awaited<ReturnType<typeof boundSmallBody>>) {
  if (!(r instanceof Response)) throw new Error("expected a refusal");
  return { status: r.status, connection: r.headers.get("connection"), retryAfter: r.headers.get("retry-after"), body: await r.json() };
}

describe("the budget", () => {
  test("per client and overall, each up to its cap exactly; given back bytes free both", () => {
    const budget = new BodyBudget(100, 40);
    expect(budget.take("a", 40)).toBe("ok");
    expect(budget.take("a", 1)).toBe("client");
    expect(budget.take("b", 40)).toBe("ok");
    expect(budget.take("c", 20)).toBe("ok");
    expect(budget.take("d", 1)).toBe("total");
    expect(budget.held()).toEqual({ bytes: 100, clients: 3 });
    budget.give("a", 40);
    expect(budget.held()).toEqual({ bytes: 60, clients: 2 });
    expect(budget.take("a", 40)).toBe("ok");
    budget.give("c", 5);
    expect(budget.held()).toEqual({ bytes: 95, clients: 3 });
  });
});

describe("boundSmallBody", () => {
  test("no body, a streaming upload route and the S3 surface pass untouched and unread", async () => {
    const budget = new BodyBudget();
    for (const [request, path] of [
      [new Request("http://kura.test/healthz"), "/healthz"],
      [post("x"), "/api/upload"],
      [post("x"), "/s3/kura/a.png"],
    ] as const) {
      const r = await boundSmallBody(request, path, budget, "c");
      expect(r instanceof Response ? "refused" : r.request).toBe(request);
      expect(request.bodyUsed).toBe(false);
    }
  });

  test("a body within the caps is read whole into an equal request, held until released (once)", async () => {
    const budget = new BodyBudget();
    const r = await boundSmallBody(streamed([new Uint8Array([123, 34]), new TextEncoder().encode('a":1}')]), "/api/auth/login", budget, "c");
    if (r instanceof Response) throw new Error("refused");
    expect([r.request.method, r.request.url, r.request.headers.get("content-type")]).toEqual(["POST", "http://kura.test/api/auth/login", "application/json"]);
    expect(await r.request.json()).toEqual({ a: 1 });
    expect(budget.held()).toEqual({ bytes: 7, clients: 1 });
    r.release();
    r.release();
    expect(budget.held()).toEqual({ bytes: 0, clients: 0 });
  });

  test("over 1 MiB: refused unread when declared, once past the cap when streamed; the budget is given back", async () => {
    const budget = new BodyBudget();
    const declared = post(new Uint8Array(16), { "content-length": String(MAX_BODY_BYTES + 1) });
    expect(await answer(await boundSmallBody(declared, "/api/auth/login", budget, "c"))).toEqual({
      status: 413,
      connection: "close",
      retryAfter: null,
      body: { error: "请求体过大（最多 1 MiB）" },
    });
    const exactly = await boundSmallBody(streamed([new Uint8Array(MAX_BODY_BYTES)]), "/api/auth/login", budget, "c");
    expect(exactly instanceof Response).toBe(false);
    if (!(exactly instanceof Response)) exactly.release();
    const over = await boundSmallBody(streamed([new Uint8Array(MAX_BODY_BYTES), new Uint8Array(1)]), "/api/auth/login", budget, "c");
    expect((await answer(over)).status).toBe(413);
    expect(budget.held()).toEqual({ bytes: 0, clients: 0 });
  });

  test("past the client's share: 429 to retry; past the whole budget: 503; either closes and gives back what it took", async () => {
    const budget = new BodyBudget(100, 40);
    const mine = await boundSmallBody(streamed([new Uint8Array(30)]), "/api/auth/login", budget, "c");
    const clientOver = await boundSmallBody(streamed([new Uint8Array(5), new Uint8Array(6)]), "/api/auth/login", budget, "c");
    expect(await answer(clientOver)).toEqual({ status: 429, connection: "close", retryAfter: "5", body: { error: "该地址同时发送的请求过多，请稍后重试" } });
    expect(budget.held().bytes).toBe(30);
    expect([budget.take("o1", 35), budget.take("o2", 30)]).toEqual(["ok", "ok"]);
    const totalOver = await boundSmallBody(streamed([new Uint8Array(6)]), "/api/auth/login", budget, "third");
    expect(await answer(totalOver)).toEqual({ status: 503, connection: "close", retryAfter: "5", body: { error: "服务器正在接收的请求过多，请稍后重试" } });
    expect(budget.held()).toEqual({ bytes: 95, clients: 3 });
    if (!(mine instanceof Response)) mine.release();
    expect(budget.held()).toEqual({ bytes: 65, clients: 2 });
  });

  test("a body not whole within the deadline is 408 and gives its share back; one the client cut off is a 400 and gives it back too", async () => {
    const budget = new BodyBudget();
    const started = performance.now();
    const slow = await boundSmallBody(streamed([new Uint8Array(10)], false), "/api/auth/login", budget, "c", 100);
    expect(await answer(slow)).toEqual({ status: 408, connection: "close", retryAfter: null, body: { error: "请求体接收超时" } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(95);
    expect(budget.held()).toEqual({ bytes: 0, clients: 0 });

    let pulls = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        if (pulls++ === 0) c.enqueue(new Uint8Array(8));
        else c.error(new Error("连接中断（测试）"));
      },
    });
    // No crash (an ERROR line and a 500 before): the client hung up.
    const cut = await boundSmallBody(post(failing), "/api/auth/login", budget, "c");
    expect(await answer(cut)).toEqual({ status: 400, connection: "close", retryAfter: null, body: { error: "请求体不完整：客户端中断了连接" } });
    expect(budget.held()).toEqual({ bytes: 0, clients: 0 });
  });
});
