// The warm-answer memo must never change an answer. Two delivery systems run the same random
// sequence of requests and changes: one plain (`deliver` only), one with the memo in front of
// `deliver`, composed as image-fast-path.ts and threads/front.ts compose it and cleared by the
// same notices the app wires (lookups, referer rules, settings). Every answer (status, headers,
// bytes), every access count and every variant-cache hit must be the same on both. The clock is
// Bun's fake system time, so the pipeline's expiry check, the row cache and the memo all see it.
import { afterAll, describe, expect, setSystemTime, test } from "bun:test";
import fc from "fast-check";
import { DEFAULT_SETTINGS, type Settings } from "../../src/config/settings-schema";
import { sqlTime } from "../../src/db/time";
import { HotAnswers } from "../../src/delivery/hot-answers";
import { HotBytes, variantKey } from "../../src/delivery/hot-bytes";
import { DeliveryLookups } from "../../src/delivery/lookups";
import { type Answer, type ColdPaths, deliver, type DeliveryDeps, type DeliveryRequest } from "../../src/delivery/pipeline";
import type { ImageRepo, ImageView } from "../../src/images/repo";
import { fuzzParams } from "../fuzz/fuzz-support";

const START = Date.parse("2026-11-27T12:00:00.400Z");
// Few choices per field, so the same request comes back often enough to be remembered and hit.
const IDS = ["img0", "img1", "img2", "missing"] as const;
const HOT_BUDGET = 3 * 1024; // room for about three of the bodies below: eviction happens often

/** The image rows as the database holds them (a change "through the API" also tells the lookups). */
type Db = Map<string, ImageView>;

function row(i: number): ImageView {
  return {
    id: `img${i}`,
    user_id: "u",
    object_key: null,
    expire_at: null,
    mime: i === 2 ? "image/png" : "image/jpeg",
    sha256: `sha${i}`.padEnd(64, String(i)),
    size: 600 + i * 100,
    created_at: "2026-11-01 10:00:00",
    blob_id: i,
    storage_key: `img/${i}`,
  } as unknown as ImageView;
}

const bytesOf = (seed: string, size: number) => new Uint8Array(size).fill(seed.length + seed.charCodeAt(seed.length - 1));

class System {
  readonly hot = new HotBytes(HOT_BUDGET, HOT_BUDGET);
  readonly lookups: DeliveryLookups;
  readonly accesses = new Map<string, number>();
  variantHits = 0;
  settings: Settings = { ...DEFAULT_SETTINGS, process_widths: [32, 64], process_formats: ["webp", "jpeg", "png"] };
  referers: readonly string[] = [];
  readonly memo: HotAnswers | undefined;
  private readonly deps: DeliveryDeps;

  constructor(db: Db, withMemo: boolean) {
    this.lookups = new DeliveryLookups({ view: (id: string) => db.get(id) } as unknown as ImageRepo);
    const hot = this.hot;
    const self = this;
    this.deps = {
      settings: { get: () => this.settings },
      access: { record: (id) => this.accesses.set(id, (this.accesses.get(id) ?? 0) + 1) },
      referers: { current: () => this.referers },
      variants: {
        hot,
        hotVariant(sha256, width, format, profile) {
          const found = hot.variant(sha256, width, format, profile);
          if (found) self.variantHits++;
          return found;
        },
      },
      log: { error() {}, warn() {} },
    };
    if (withMemo) {
      const memo = new HotAnswers(this.hot, (id) => this.lookups.freshUntil(id));
      this.memo = memo;
      this.lookups.watch(() => memo.clear());
    }
  }

  /** A change every thread is told of (referer rules, settings): the app clears the memo with it. */
  changed() {
    this.memo?.clear();
  }

  /** Cold paths that behave like the main thread's: read "from storage", keep small bytes hot. */
  private readonly cold: ColdPaths = {
    lookupFailed: () => new Response("lookup failed", { status: 500 }),
    redirect: (_req, image) => new Response(null, { status: 302, headers: { location: `https://cdn.example/${image.id}` } }),
    original: (req, image, headers, range) => {
      const bytes = this.hot.set(image.sha256, bytesOf(image.sha256, image.size));
      if (range) return new Response(bytes.slice(range.start, range.end + 1), { status: 206, headers });
      return new Response(req.request.method === "HEAD" ? null : bytes, { status: 200, headers });
    },
    variant: (req, image, headers, { width, format, profile }) => {
      const key = variantKey(image.sha256, width, format, profile);
      const bytes = this.hot.set(key, bytesOf(key, width * 8));
      headers["content-type"] = `image/${format}`;
      return new Response(req.request.method === "HEAD" ? null : bytes, { status: 200, headers });
    },
  };

  /** One `/i/` request, through the memo when there is one (as image-fast-path.ts does). */
  serve(request: Request, id: string, query: string): Answer {
    const key = this.memo ? HotAnswers.keyOf(request) : undefined;
    const hit = key === undefined ? undefined : this.memo!.answer(key);
    if (hit) {
      this.deps.access.record(hit.imageId);
      if (hit.variant) this.variantHits++;
      return hit.response;
    }
    const req: DeliveryRequest = { area: "i", request, isPublic: true, direct: true, query, lookup: () => this.lookups.byId(id) };
    const answer = deliver(this.deps, req, this.cold);
    if (key !== undefined && req.prepared && answer instanceof Response) this.memo!.remember(key, req.prepared);
    return answer;
  }
}

const fields = {
  image: fc.constantFrom(...IDS),
  query: fc.constantFrom("", "w=32", "w=64&format=webp", "w=33"),
  method: fc.constantFrom("GET", "GET", "GET", "HEAD"),
  accept: fc.constantFrom(undefined, "image/webp,*/*", "image/png"),
  referer: fc.constantFrom(undefined, "", "https://friend.example/p", "https://elsewhere.example/"),
  conditional: fc.constantFrom(undefined, undefined, undefined, "etag", "range"),
};
type Fields = { [K in keyof typeof fields]: (typeof fields)[K] extends fc.Arbitrary<infer T> ? T : never };

/**
 * The requests of a run: a base request and variants of it that differ in exactly one field.
 * Each comes back many times (so it is remembered and hit), and a remembered answer is asked
 * for by requests that differ in a single field: what catches a field missing from the key.
 */
const templates = fc
  .tuple(
    fc.record(fields),
    fc.array(fc.oneof(...(Object.keys(fields) as (keyof Fields)[]).map((name) => fields[name].map((value) => ({ name, value })))), {
      minLength: 3,
      maxLength: 6,
    }),
  )
  .map(([base, tweaks]) => [base, ...tweaks.map(({ name, value }) => ({ ...base, [name]: value }) as Fields)]);

const request = fc.record({ kind: fc.constant("request" as const), template: fc.nat({ max: 6 }) });

const op = fc.oneof(
  { weight: 20, arbitrary: request },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("delete" as const), image: fc.integer({ min: 0, max: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restore" as const), image: fc.integer({ min: 0, max: 2 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("expiry" as const),
      image: fc.integer({ min: 0, max: 2 }),
      inSeconds: fc.option(fc.integer({ min: -1, max: 3 }), { freq: 4 }),
      throughApi: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("settings" as const),
      formats: fc.subarray<Settings["process_formats"][number]>(["webp", "jpeg", "png"], { minLength: 1 }),
      allowEmptyReferer: fc.boolean(),
      redirect: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("referers" as const), patterns: fc.subarray(["friend.example", "*.example"]) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("clock" as const), ms: fc.integer({ min: 0, max: 1500 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("pressure" as const), size: fc.integer({ min: 100, max: 1500 }) }) },
);

type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;

/** Status, headers and body of an answer, or the error `deliver` threw. */
async function shape(run: () => Answer): Promise<string> {
  let response: Response;
  try {
    response = await run();
  } catch (err) {
    return `threw ${(err as Error).name}: ${(err as Error).message}`;
  }
  const headers = [...response.headers.entries()].sort(([a], [b]) => a.localeCompare(b));
  const body = new Uint8Array(await response.arrayBuffer());
  return JSON.stringify({ status: response.status, headers, body: [body.length, body[0] ?? -1, body.at(-1) ?? -1] });
}

async function play(requests: Fields[], ops: Op[]) {
  let now = START;
  setSystemTime(new Date(now));
  const db: Db = new Map([0, 1, 2].map((i) => [`img${i}`, row(i)]));
  const plain = new System(db, false);
  const memo = new System(db, true);
  const both = [plain, memo];
  let filler = 0;
  for (const [step, op] of ops.entries()) {
    switch (op.kind) {
      case "request": {
        const r = requests[op.template % requests.length]!;
        const headers: Record<string, string> = {};
        if (r.accept !== undefined) headers.accept = r.accept;
        if (r.referer !== undefined) headers.referer = r.referer;
        if (r.conditional === "range") headers.range = "bytes=2-9";
        if (r.conditional === "etag") headers["if-none-match"] = `"${row(Number(r.image.at(-1)) || 0).sha256}"`;
        const url = `http://kura.test/i/${r.image}${r.query ? `?${r.query}` : ""}`;
        const answers = await Promise.all(both.map((s) => shape(() => s.serve(new Request(url, { method: r.method, headers }), r.image, r.query))));
        expect({ step, answer: answers[1] }).toEqual({ step, answer: answers[0] });
        break;
      }
      case "delete":
        db.delete(`img${op.image}`);
        for (const s of both) s.lookups.forget(`img${op.image}`);
        break;
      case "restore":
        db.set(`img${op.image}`, row(op.image));
        for (const s of both) s.lookups.forget(`img${op.image}`);
        break;
      case "expiry": {
        const current = db.get(`img${op.image}`);
        if (!current) break;
        const expireAt = op.inSeconds === null ? null : sqlTime(Math.ceil(now / 1000) * 1000 + op.inSeconds * 1000);
        db.set(`img${op.image}`, { ...current, expire_at: expireAt });
        // Out of band (not through the API): the rows already cached stay until they are due.
        if (op.throughApi) for (const s of both) s.lookups.forget(`img${op.image}`);
        break;
      }
      case "settings":
        for (const s of both) {
          s.settings = {
            ...s.settings,
            process_formats: op.formats,
            allow_empty_referer: op.allowEmptyReferer,
            access_mode: op.redirect ? "redirect" : "proxy",
          };
          s.changed();
        }
        break;
      case "referers":
        for (const s of both) {
          s.referers = op.patterns;
          s.changed();
        }
        break;
      case "clock":
        now += op.ms;
        setSystemTime(new Date(now));
        break;
      case "pressure":
        filler++;
        for (const s of both) s.hot.set(`filler-${filler}`, new Uint8Array(op.size));
        break;
    }
  }
  expect(Object.fromEntries(memo.accesses)).toEqual(Object.fromEntries(plain.accesses));
  expect(memo.variantHits).toBe(plain.variantHits);
}

describe("warm-answer memo, equivalence", () => {
  afterAll(() => {
    setSystemTime();
  });

  test("answers, access counts and variant hits are the same with and without the memo", async () => {
    await fc.assert(
      fc.asyncProperty(templates, fc.array(op, { minLength: 40, maxLength: 200 }), (requests, ops) => play(requests, ops)),
      fuzzParams(25),
    );
  });

  test("the memo is used at all in such runs (else the property above proves nothing)", async () => {
    setSystemTime(new Date(START));
    const db: Db = new Map([[`img0`, row(0)]]);
    const s = new System(db, true);
    const get = () => s.serve(new Request("http://kura.test/i/img0"), "img0", "");
    for (let i = 0; i < 3; i++) await (await get()).arrayBuffer();
    expect(s.memo!.size).toBe(1);
    expect(s.memo!.answer(HotAnswers.keyOf(new Request("http://kura.test/i/img0"))!)).toBeDefined();
  });
});
