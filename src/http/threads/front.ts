/**
 * A delivery thread (Bun Worker). It listens on the public port beside the main thread
 * (SO_REUSEPORT: the kernel spreads connections over the listeners), answers `GET`/`HEAD /i/`
 * from memory with the same pipeline as the main thread, and hands everything else to the
 * main thread (handover.ts): other paths, images it has no bytes for yet (their answer fills
 * its memory), redirect mode, errors, and any request that arrives while it has not yet
 * applied a change the main thread announced (protocol.ts, `generation`).
 *
 * front-worker.ts is the Worker's entry around it. It imports no sharp, no channels and no router: what it holds is one read-only SQLite
 * connection for image rows, the settings and hotlink rules the main thread sends, and its
 * own hot bytes.
 */
import { Database } from "bun:sqlite";
import type { Server } from "bun";
import type { Settings } from "../../config/settings-schema";
import { originalEtag } from "../../delivery/etag";
import { fastImageSegment, imageBySegment, NOT_FAST } from "../../delivery/fast-path";
import { HotAnswers } from "../../delivery/hot-answers";
import { HOT_BYTES_BUDGET, HotBytes, variantKey } from "../../delivery/hot-bytes";
import { DeliveryLookups } from "../../delivery/lookups";
import { type ColdPaths, deliver, type DeliveryDeps, type DeliveryRequest, HOT_ITEM_MAX } from "../../delivery/pipeline";
import { ImageRepo } from "../../images/repo";
import { log } from "../../ops/log";
import { unhandledServerError } from "../disk-full";
import { hasOrigin } from "../raw-url";
import { rawTarget } from "../../shared/url-target";
import { FrontStatsBatch } from "./front-stats";
import { handOver, type HandoverTarget } from "./handover";
import type { FrontInit, FrontInvalidate, FrontStats } from "./protocol";
import { CONNECTION_IDLE_SECONDS } from "../idle-limits";

export class DeliveryFront {
  private settings: Settings;
  private referers: readonly string[];
  private readonly generation: Int32Array;
  private applied: number;
  private lookups: DeliveryLookups;
  private readonly hot: HotBytes;
  /** Whole answers to warm GETs; cleared with every change applied (image-fast-path.ts does the same on the main thread). */
  private readonly warm: HotAnswers;
  private readonly stats: FrontStatsBatch;
  private readonly deps: DeliveryDeps;
  private readonly target: HandoverTarget;
  private readonly db: Database;
  private server: Server<undefined> | undefined;

  constructor(init: FrontInit, report: (stats: FrontStats) => void) {
    this.stats = new FrontStatsBatch(report);
    this.settings = init.settings;
    this.referers = init.referers;
    this.generation = new Int32Array(init.generation);
    this.applied = init.applied;
    this.target = { socket: init.socket, secret: init.secret };
    this.db = new Database(init.dbPath);
    this.db.run("PRAGMA busy_timeout = 5000");
    this.db.run("PRAGMA query_only = ON");
    this.lookups = new DeliveryLookups(new ImageRepo(this.db));
    this.hot = new HotBytes(init.hotBytesBudget || HOT_BYTES_BUDGET, HOT_ITEM_MAX);
    this.warm = new HotAnswers(this.hot, (id) => this.lookups.freshUntil(id));
    const stats = this.stats;
    const hot = this.hot;
    this.deps = {
      settings: { get: () => this.settings },
      access: { record: (id) => stats.recordAccess(id) },
      referers: { current: () => this.referers },
      variants: {
        hot,
        hotVariant(sha256, width, format, profile) {
          const variant = hot.variant(sha256, width, format, profile);
          if (variant) stats.recordVariantHit();
          return variant;
        },
      },
      log,
    };
  }

  /** Opens the listener; returns its base URL. */
  listen(init: FrontInit): string {
    this.server = Bun.serve({
      hostname: init.hostname,
      port: init.port,
      reusePort: true,
      maxRequestBodySize: init.maxRequestBodySize,
      idleTimeout: CONNECTION_IDLE_SECONDS,
      fetch: (request) => this.handle(request),
      error: unhandledServerError(log),
    });
    return `http://${init.hostname}:${this.server.port}`;
  }

  /** Reports what is counted so far at once. */
  flushReports() {
    this.stats.flush();
  }

  apply(change: FrontInvalidate) {
    if (change.everything) this.lookups = new DeliveryLookups(new ImageRepo(this.db));
    for (const id of change.images) this.lookups.forget(id);
    for (const [userId, key] of change.aliases) this.lookups.forgetAlias(userId, key);
    for (const sha256 of change.blobs) this.hot.deletePrefix(sha256);
    if (change.settings) this.settings = change.settings;
    if (change.referers) this.referers = change.referers;
    this.warm.clear();
    this.applied = change.generation;
  }

  async stop() {
    await this.server?.stop(false);
    this.flushReports();
    this.db.close();
  }

  private handle(request: Request): Response | Promise<Response> {
    const started = performance.now();
    const current = Atomics.load(this.generation, 0) === this.applied;
    const key = current ? HotAnswers.keyOf(request) : undefined;
    const hit = key === undefined ? undefined : this.warm.answer(key);
    if (hit) {
      this.stats.recordAccess(hit.imageId);
      if (hit.variant) this.stats.recordVariantHit();
      this.stats.recordAnswer("GET", 200, (performance.now() - started) / 1000);
      return hit.response;
    }
    const url = request.url;
    // Without a usable Host the main thread decides (handover.ts carries the request as sent).
    if (!hasOrigin(url)) return this.pass(request, false);
    const { path, query } = rawTarget(url);
    const segment = fastImageSegment(request, path);
    if (segment === NOT_FAST || !current) return this.pass(request, false);
    const req: DeliveryRequest = { area: "i", request, isPublic: true, direct: true, query, lookup: () => imageBySegment(this.lookups, segment) };
    let answer: Response | Promise<Response>;
    try {
      answer = deliver(this.deps, req, this.cold);
    } catch {
      // A bad `w`/`format` (400, not counted) or anything unexpected: the main thread's answer is the one to give.
      return this.pass(request, false);
    }
    // Answers from the main thread are in its own metrics already.
    if (answer instanceof Response) {
      this.stats.recordAnswer(request.method, answer.status, (performance.now() - started) / 1000);
      if (key !== undefined && req.prepared) this.warm.remember(key, req.prepared);
    }
    return answer;
  }

  private pass(request: Request, counted: boolean): Promise<Response> {
    return handOver(this.target, request, this.server?.requestIP(request)?.address ?? "", counted);
  }

  /**
   * Everything past memory goes to the main thread, with the access already counted here. A
   * full 200 answer whose ETag is exactly the representation this thread looked for (not a
   * fallback, not a different format after a settings change) fills its memory.
   */
  private readonly cold: ColdPaths = {
    lookupFailed: (req) => this.pass(req.request, false),
    redirect: (req) => this.pass(req.request, true),
    original: (req, image, _headers, range) => {
      const answer = this.pass(req.request, true);
      return range ? answer : this.keep(answer, originalEtag(image.sha256), image.sha256);
    },
    variant: (req, image, _headers, choice) =>
      this.keep(this.pass(req.request, true), choice.etag, variantKey(image.sha256, choice.width, choice.format, choice.profile)),
  };

  private async keep(pending: Promise<Response>, etag: string, key: string): Promise<Response> {
    const answer = await pending;
    const length = Number(answer.headers.get("content-length") ?? Number.NaN);
    if (answer.status !== 200 || answer.headers.get("etag") !== etag || !(length <= HOT_ITEM_MAX) || !answer.body) return answer;
    const read = new Uint8Array(await answer.arrayBuffer());
    // The main thread sends a small answer only once it is whole and checked; a length that
    // differs would mean it was cut short, and such bytes must never be served from memory.
    if (read.byteLength !== length) throw new Error(`主线程的应答不完整: ${read.byteLength}/${length} 字节`);
    const bytes = this.hot.set(key, read);
    return new Response(bytes, { status: 200, headers: answer.headers });
  }
}
