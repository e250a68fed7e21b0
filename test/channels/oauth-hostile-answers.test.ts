/**
 * The OAuth drivers when the provider (or a proxy in front of it) answers badly: an endless
 * JSON body, an endless token answer, an endless error body, JSON cut short, a connection
 * reset mid-body. Memory stays bounded (a few MiB read, the rest cancelled) and every error
 * is a Chinese message, never the runtime's English (`JSON Parse error`, `pass verbose: true`).
 * The fakes of test/channels/fakes answer; a fetch wrapper replaces the answers under test.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { errorOf } from "../helpers/rejection";
import { startOAuthFakes } from "./fakes/oauth-providers.ts";

const { providers, stop } = startOAuthFakes();
afterAll(stop);

const MiB = 1024 * 1024;

/** How an answer is spoiled: its body replaced (status kept unless given). */
type Spoil = { status?: number; body: () => ReadableStream<Uint8Array> };

/** A body of `prefix` and then `piece` forever, counting the bytes handed out. */
function endless(prefix: string, piece: string, sent: { bytes: number }) {
  const chunk = new TextEncoder().encode(piece.repeat(Math.ceil(65536 / piece.length)));
  let first = true;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = first ? new TextEncoder().encode(prefix) : chunk;
      first = false;
      sent.bytes += next.byteLength;
      controller.enqueue(next);
    },
  });
}

/** A body that sends `text` and then fails the way a reset socket does in Bun's fetch. */
function resetAfter(text: string) {
  let first = true;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!first) {
        const err = Object.assign(
          new Error("The socket connection was closed unexpectedly. For more information, pass `verbose: true` in the second argument to fetch()"),
          {
            code: "ECONNRESET",
          },
        );
        return controller.error(err);
      }
      first = false;
      controller.enqueue(new TextEncoder().encode(text));
    },
  });
}

/** Real fetch to the fake, with the answers `pick` chooses spoiled. */
function spoiling(pick: (url: URL, res: Response) => Spoil | undefined): typeof fetch {
  const wrapped = async (input: string | URL | Request, init?: RequestInit) => {
    const res = await fetch(input, init);
    const spoil = pick(new URL(typeof input === "string" || input instanceof URL ? input : input.url), res);
    if (!spoil) return res;
    await res.body?.cancel();
    return new Response(spoil.body(), { status: spoil.status ?? res.status, headers: { "content-type": "application/json" } });
  };
  return wrapped as typeof fetch;
}

const isToken = (url: URL) => url.pathname === "/token";
const isJson = (res: Response) => (res.headers.get("content-type") ?? "").includes("json");

/** Chinese, and none of the runtime's English. */
function expectOwnText(message: string) {
  expect(message).toMatch(/[\u4e00-\u9fff]/);
  expect(message).not.toMatch(/JSON Parse error|verbose|Out of memory|Unexpected EOF/);
}

for (const p of providers) {
  describe(`${p.name}: hostile answers`, () => {
    test("an endless JSON answer is read to 8 MiB, then refused in Chinese", async () => {
      const sent = { bytes: 0 };
      const fetchFn = spoiling((url, res) =>
        !isToken(url) && res.ok && isJson(res) ? { body: () => endless('{"value":[', '{"name":"x"},', sent) } : undefined,
      );
      const err = await errorOf(p.make({}, { fetch: fetchFn }).probe(false));
      expectOwnText(err.message);
      expect(err.message).toMatch(/超过 8 MiB/);
      await Bun.sleep(20);
      expect(sent.bytes).toBeGreaterThan(8 * MiB);
      expect(sent.bytes).toBeLessThan(9 * MiB);
    });

    test("an endless token answer is read to 1 MiB, then refused in Chinese", async () => {
      const sent = { bytes: 0 };
      const fetchFn = spoiling((url) => (isToken(url) ? { body: () => endless('{"access_token":"', "a", sent) } : undefined));
      const err = await errorOf(p.make({ token: p.oauth.tokenJson({ expiredLocally: true }) }, { fetch: fetchFn }).probe(false));
      expectOwnText(err.message);
      expect(err.message).toMatch(/令牌接口的响应超过 1 MiB/);
      expect(sent.bytes).toBeLessThan(2 * MiB);
    });

    test("an endless error body (token endpoint and API) is read as a 64 KiB prefix", async () => {
      const sent = { bytes: 0 };
      const refusing = spoiling((url) => (isToken(url) ? { status: 400, body: () => endless('{"error":"invalid_grant","x":"', "y", sent) } : undefined));
      const tokenErr = await errorOf(p.make({ token: p.oauth.tokenJson({ expiredLocally: true }) }, { fetch: refusing }).probe(false));
      expectOwnText(tokenErr.message);
      expect(tokenErr.message).toContain("HTTP 400");
      expect(sent.bytes).toBeLessThan(MiB);
      sent.bytes = 0;
      const apiRefusing = spoiling((url) => (isToken(url) ? undefined : { status: 403, body: () => endless('{"error":{"code":"x","m":"', "y", sent) }));
      const apiErr = await errorOf(p.make({}, { fetch: apiRefusing }).probe(false));
      expectOwnText(apiErr.message);
      expect(apiErr.message).toContain("HTTP 403");
      expect(sent.bytes).toBeLessThan(MiB);
    });

    test("JSON cut short and a reset mid-body are Chinese errors without internals", async () => {
      const cut = spoiling((url, res) => (!isToken(url) && res.ok && isJson(res) ? { body: () => new Blob(['{"value":[{"na']).stream() } : undefined));
      const cutErr = await errorOf(p.make({}, { fetch: cut }).probe(false));
      expectOwnText(cutErr.message);
      expect(cutErr.message).toMatch(/不是有效的 JSON/);
      const reset = spoiling((url, res) => (!isToken(url) && res.ok && isJson(res) ? { body: () => resetAfter('{"value":[') } : undefined));
      const resetErr = await errorOf(p.make({}, { fetch: reset }).probe(false));
      expectOwnText(resetErr.message);
      expect(resetErr.message).toMatch(/连接被重置/);
    });
  });
}
