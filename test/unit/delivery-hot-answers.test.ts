// The warm-answer memo's own rules (src/delivery/hot-answers.ts), deterministic with a fake
// clock; the black-box side (every change clears it, hits are counted) is
// test/http/delivery-warm-answers.test.ts.
import { describe, expect, test } from "bun:test";
import { sqlTime } from "../../src/db/time";
import { HotAnswers, type PreparedAnswer } from "../../src/delivery/hot-answers";
import { HotBytes } from "../../src/delivery/hot-bytes";
import type { ImageView } from "../../src/images/repo";

const URL_BASE = "http://127.0.0.1:8080/i/abc";

function setup(budget = 1024) {
  let now = 1_000_000;
  const hot = new HotBytes(budget, budget);
  const fresh = new Map<string, number>();
  const memo = new HotAnswers(
    hot,
    (id) => fresh.get(id) ?? now,
    () => now,
  );
  const prepare = (id: string, hotKey: string, size = 100, expireAt: string | null = null): PreparedAnswer => {
    fresh.set(id, now + 2000);
    const body = hot.set(hotKey, new Uint8Array(size).fill(7));
    return { image: { id, expire_at: expireAt } as ImageView, hotKey, variant: hotKey.includes("-"), body, headers: new Headers({ etag: `"${hotKey}"` }) };
  };
  return { hot, memo, prepare, advance: (ms: number) => (now += ms), at: () => now };
}

const key = (init?: RequestInit, url = URL_BASE) => HotAnswers.keyOf(new Request(url, init));

describe("warm-answer memo", () => {
  test("gives the remembered answer again: same bytes, same headers, a new Response each time", async () => {
    const { memo, prepare } = setup();
    const k = key()!;
    memo.remember(k, prepare("img", "sha"));
    const first = memo.answer(k)!;
    const second = memo.answer(k)!;
    expect(first.response).not.toBe(second.response);
    expect(first.imageId).toBe("img");
    expect(first.variant).toBe(false);
    expect(first.response.headers.get("etag")).toBe('"sha"');
    expect(new Uint8Array(await second.response.arrayBuffer())).toEqual(new Uint8Array(100).fill(7));
  });

  test("only unconditional whole-body GETs have a key; Accept and Referer (absent or empty) tell answers apart", () => {
    expect(key({ method: "HEAD" })).toBeUndefined();
    expect(key({ headers: { range: "bytes=0-1" } })).toBeUndefined();
    expect(key({ headers: { "if-none-match": '"x"' } })).toBeUndefined();
    expect(key({ headers: { "if-range": '"x"' } })).toBeUndefined();
    expect(key({}, `${URL_BASE}?w=${"9".repeat(3000)}`)).toBeUndefined();
    // A GET with a body is the router's (fast-path.ts), never the memo's.
    expect(key({ body: "x" })).toBeUndefined();
    expect(key({ headers: { referer: `https://a.example/${"x".repeat(3000)}` } })).toBeUndefined();
    const keys = [
      key(),
      key({ headers: { accept: "image/webp" } }),
      key({ headers: { referer: "" } }),
      key({ headers: { referer: "https://a.example/" } }),
      key({ headers: { accept: "" } }),
      key({}, `${URL_BASE}?w=24`),
    ];
    expect(keys.every((k) => typeof k === "string")).toBe(true);
    expect(new Set(keys).size).toBe(keys.length);
  });

  test("an entry ends with the freshness of the row it was built from", () => {
    const { memo, prepare, advance } = setup();
    const k = key()!;
    memo.remember(k, prepare("img", "sha"));
    advance(1999);
    expect(memo.answer(k)).toBeDefined();
    advance(1);
    expect(memo.answer(k)).toBeUndefined();
  });

  test("an entry ends when its image expires, even while the row is fresh", () => {
    const { memo, prepare, advance, at } = setup();
    const k = key()!;
    memo.remember(k, prepare("img", "sha", 100, sqlTime(at() + 1000)));
    advance(999);
    expect(memo.answer(k)).toBeDefined();
    advance(1);
    expect(memo.answer(k)).toBeUndefined();
    // Already expired, or built from a row due for a re-read: not remembered at all.
    memo.remember(k, prepare("img", "sha", 100, sqlTime(at())));
    expect(memo.size).toBe(0);
  });

  test("bytes the hot-bytes budget evicted are not served from the memo", () => {
    const { memo, prepare, hot } = setup(250);
    const k = key()!;
    memo.remember(k, prepare("img", "sha", 100));
    expect(memo.answer(k)).toBeDefined();
    hot.set("other-1", new Uint8Array(100));
    hot.set("other-2", new Uint8Array(100)); // over 250 bytes: the least recently used ("sha") goes
    expect(hot.get("sha")).toBeUndefined();
    expect(memo.answer(k)).toBeUndefined();
  });

  test("the memo does not keep evicted bytes alive (the budget holds in memory, not only in what is served)", () => {
    const { memo, prepare, hot } = setup(250);
    const k = key()!;
    const watch = (() => {
      const prepared = prepare("img", "sha", 100);
      memo.remember(k, prepared);
      return new WeakRef(prepared.body);
    })();
    hot.set("other-1", new Uint8Array(100));
    hot.set("other-2", new Uint8Array(100));
    Bun.gc(true);
    expect(watch.deref()).toBeUndefined();
    expect(memo.size).toBe(1); // the entry is still there, but holds nothing
  });

  test("a hit keeps its bytes recently used in HotBytes, like a pipeline answer would", () => {
    const { memo, prepare, hot } = setup(250);
    const k = key()!;
    memo.remember(k, prepare("img", "sha", 100));
    hot.set("other-1", new Uint8Array(100));
    expect(memo.answer(k)).toBeDefined(); // "sha" is now the most recent
    hot.set("other-2", new Uint8Array(100));
    expect(hot.get("other-1")).toBeUndefined();
    expect(memo.answer(k)).toBeDefined();
  });

  test("variants are told apart from originals; clear() forgets everything", () => {
    const { memo, prepare } = setup();
    const k = key({}, `${URL_BASE}?w=24`)!;
    memo.remember(k, prepare("img", "sha-24-webp"));
    expect(memo.answer(k)!.variant).toBe(true);
    memo.clear();
    expect(memo.answer(k)).toBeUndefined();
  });

  test("a key is at most 2 KiB: URL, Accept and Referer together", () => {
    // URL + "\n" + Accept + "\n" + Referer; with both headers absent each counts one character.
    const urlOfLength = (n: number) => `${URL_BASE}?q=${"a".repeat(n - URL_BASE.length - 3)}`;
    expect(key({}, urlOfLength(2048 - 4))!.length).toBe(2048);
    expect(key({}, urlOfLength(2048 - 3))).toBeUndefined();
    expect(key({ headers: { referer: "r".repeat(2048 - URL_BASE.length - 3) } })!.length).toBe(2048);
    expect(key({ headers: { referer: "r".repeat(2048 - URL_BASE.length - 2) } })).toBeUndefined();
  });

  test("remembering a key again makes it the newest: the oldest other entry goes first", () => {
    const { memo, prepare } = setup(1024 * 1024);
    const k = (i: number) => key({}, `${URL_BASE}?n=${i}`)!;
    for (let i = 0; i < 4096; i++) memo.remember(k(i), prepare(`img${i}`, `sha${i}`, 1));
    expect(memo.size).toBe(4096); // exactly the bound: nothing dropped yet
    expect(memo.answer(k(0))).toBeDefined();
    memo.remember(k(0), prepare("img0", "sha0", 1));
    memo.remember(k(4096), prepare("img4096", "sha4096", 1));
    expect(memo.size).toBe(4096);
    expect(memo.answer(k(0))).toBeDefined();
    expect(memo.answer(k(1))).toBeUndefined();
  });

  test("the number of entries is bounded", () => {
    const { memo, prepare } = setup(1024 * 1024);
    for (let i = 0; i < 5000; i++) memo.remember(key({}, `${URL_BASE}?n=${i}`)!, prepare(`img${i}`, `sha${i}`, 10));
    expect(memo.size).toBeLessThanOrEqual(4096);
    expect(memo.answer(key({}, `${URL_BASE}?n=4999`)!)).toBeDefined();
    expect(memo.answer(key({}, `${URL_BASE}?n=0`)!)).toBeUndefined();
  });
});
