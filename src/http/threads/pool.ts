import { randomBytes, timingSafeEqual } from "node:crypto";
import type { Server } from "bun";
import type { DeliveryThreads as ThreadsConfig } from "../../config/bootstrap";
import type { AppContext } from "../../context";
import { HOT_BYTES_BUDGET } from "../../delivery/hot-bytes";
import type { HttpEntry } from "../app";
import { onWorkerDeath } from "../../shared/inline-worker";
import { jsonError } from "../errors";
import { unhandledServerError } from "../disk-full";
import { restoreTarget } from "./handover";
import {
  type FromFront,
  type FrontInvalidate,
  type FrontStats,
  HANDOVER_COUNTED_HEADER,
  HANDOVER_PEER_HEADER,
  HANDOVER_SECRET_HEADER,
  type ToFront,
} from "./protocol";

/** `/i/` requests per second on the main thread that start the delivery threads in `auto` mode. */
export const START_RATE_PER_S = 300;
/** After a thread failed, how long before load may start threads again. */
const RETRY_AFTER_MS = 10_000;
const STOP_DEADLINE_MS = 10_000;
/** Longest a scrape waits for a thread's counts (a stuck thread must not stall /metrics). */
const REPORT_DEADLINE_MS = 250;

/**
 * The Worker entry: next to this file when running from source; in the compiled executable,
 * where build.ts lists it as a second entry point, at its path below src/ inside the bundle
 * (this module's own URL is then the executable's).
 */
function frontWorkerUrl(): string {
  if (import.meta.url.includes("$bunfs")) return "./http/threads/front-worker.ts";
  return new URL("./front-worker.ts", import.meta.url).href;
}

interface Front {
  worker: Worker;
  index: number;
  answers: { add(n: number): void };
  /** Callers waiting for the thread's `reported` / `stopped` reply. */
  waiting: { reported: (() => void)[]; stopped: (() => void)[] };
}

/** Asks every thread `request` and resolves when each replied `reply`, or after `deadlineMs` for one that did not. */
function askAll(fronts: readonly Front[], request: ToFront, reply: keyof Front["waiting"], deadlineMs: number): Promise<void> {
  return Promise.all(
    fronts.map(
      (front) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, deadlineMs);
          front.waiting[reply].push(() => {
            clearTimeout(timer);
            resolve();
          });
          front.worker.postMessage(request);
        }),
    ),
  ).then(() => undefined);
}

/**
 * The main thread's side of the delivery threads (front.ts): starts them (at once, or the first
 * time `/i/` is busy), gives them a private socket for everything they hand over, tells them
 * of every change that alters an `/i/` answer, and adds their access counts and metrics to its
 * own. Everything stateful (writes, jobs, sessions, rate limits) stays on the main thread.
 */
export class DeliveryThreadPool {
  private state: "idle" | "starting" | "running" | "stopped" = "idle";
  private fronts: Front[] = [];
  private internal: { server: Server<undefined>; socket: string } | undefined;
  private readonly secret = randomBytes(32);
  private readonly secretText = this.secret.toString("hex");
  private readonly generation = new Int32Array(new SharedArrayBuffer(4));
  private pending: FrontInvalidate | undefined;
  private windowStart = 0;
  private windowCount = 0;
  private notBefore = 0;
  private listen: { hostname: string; port: number; maxRequestBodySize: number } | undefined;

  constructor(
    private readonly app: AppContext,
    private readonly entry: HttpEntry,
    private readonly config: ThreadsConfig,
  ) {
    app.lookups.watch(({ image, alias }) => {
      const change = this.change();
      if (image) change.images.push(image);
      if (alias) change.aliases.push(alias);
    });
    app.referers.watch((patterns) => {
      this.change().referers = patterns;
    });
    app.settings.onChange((_changed, settings) => {
      this.change().settings = { ...settings };
    });
    app.variants.onBlobDropped = (sha256) => void this.change().blobs.push(sha256);
    app.metrics.beforeScrape.add(() => this.gatherReports());
  }

  /** Every thread hands in what it counted so far (answered within REPORT_DEADLINE_MS or left for the next scrape). */
  private gatherReports(): Promise<void> {
    return askAll(this.fronts, { type: "report" }, "reported", REPORT_DEADLINE_MS);
  }

  /** Threads are configured: the public listener must be opened with SO_REUSEPORT. */
  get enabled(): boolean {
    return this.config.count > 0;
  }

  /** Called once the public listener is open; eager configurations start their threads now. */
  attach(listen: { hostname: string; port: number; maxRequestBodySize: number }) {
    this.listen = listen;
    if (this.enabled) this.entry.watchDeliveries((started) => this.noteDelivery(started));
    if (this.enabled && this.config.eager) void this.start();
  }

  /** `auto`: a fast-path `/i/` request started at `started` (performance.now()). */
  private noteDelivery(started: number) {
    if (this.state !== "idle" || started < this.notBefore) return;
    if (started - this.windowStart > 1000) {
      this.windowStart = started;
      this.windowCount = 0;
    }
    if (++this.windowCount >= START_RATE_PER_S) void this.start();
  }

  async start(): Promise<void> {
    if (this.state !== "idle" || !this.listen) return;
    this.state = "starting";
    const listen = this.listen;
    // Every Worker made by this attempt, so a failure of one also ends the others (already listening).
    const spawned: Front[] = [];
    try {
      const internal = this.openInternal(listen.maxRequestBodySize);
      const settings = { ...this.app.settings.get() };
      const generation = Atomics.load(this.generation, 0);
      const started = await Promise.all(
        Array.from({ length: this.config.count }, (_, index) =>
          this.spawn(index + 1, spawned, {
            type: "init",
            hostname: listen.hostname,
            port: listen.port,
            socket: internal.socket,
            secret: this.secretText,
            dbPath: this.app.db.filename,
            maxRequestBodySize: listen.maxRequestBodySize,
            hotBytesBudget: HOT_BYTES_BUDGET,
            settings,
            referers: this.app.referers.current(),
            generation: this.generation.buffer as SharedArrayBuffer,
            applied: generation,
          }),
        ),
      );
      this.fronts = started;
      if (this.state !== "starting") return void this.terminate(spawned);
      this.state = "running";
      // Changes made while the threads started: which rows they touched is not known any more.
      if (Atomics.load(this.generation, 0) !== generation) {
        const change = this.change();
        change.settings = { ...this.app.settings.get() };
        change.referers = this.app.referers.current();
        change.everything = true;
      }
      this.app.metrics.deliveryThreads.set(this.fronts.length);
      this.app.log.info("投递线程已启动", { threads: this.fronts.length });
    } catch (err) {
      this.app.log.error("投递线程启动失败，由主线程继续服务", { err: (err as Error).message });
      this.terminate(spawned);
      if (this.state === "starting") this.state = "idle";
      this.notBefore = performance.now() + RETRY_AFTER_MS;
    }
  }

  /** The private listener for handed-over requests: an abstract unix socket (no file, gone with the process). */
  private openInternal(maxRequestBodySize: number) {
    if (this.internal) return this.internal;
    const socket = `\0kura-${process.pid}-${randomBytes(8).toString("hex")}`;
    const server = Bun.serve({
      unix: socket,
      maxRequestBodySize,
      fetch: (request) => this.handedOver(request),
      error: unhandledServerError(this.app.log),
    });
    this.internal = { server, socket };
    return this.internal;
  }

  private spawn(index: number, spawned: Front[], init: ToFront): Promise<Front> {
    const worker = new Worker(frontWorkerUrl());
    const front: Front = { worker, index, answers: this.app.metrics.threadAnswers.child({ thread: String(index) }), waiting: { reported: [], stopped: [] } };
    spawned.push(front);
    return new Promise<Front>((resolve, reject) => {
      worker.onmessage = (event: MessageEvent<FromFront>) => {
        const message = event.data;
        if (message.type === "listening") resolve(front);
        else if (message.type === "failed") reject(new Error(message.error));
        else if (message.type === "stats") this.absorb(front, message);
        else if (message.type === "reported" || message.type === "stopped") for (const done of front.waiting[message.type].splice(0)) done();
      };
      // An uncaught error or an exit: a start in progress fails instead of waiting for good.
      onWorkerDeath(worker, (reason) => {
        reject(new Error(reason));
        this.lost(front, reason);
      });
      worker.postMessage(init);
    });
  }

  /** A thread died: the kernel stops sending it connections; the main thread serves alone until load starts threads again. */
  private lost(front: Front, reason: string) {
    if (!this.fronts.includes(front) || this.state !== "running") return;
    this.app.log.error("投递线程异常退出，由主线程继续服务", { thread: front.index, err: reason });
    this.terminateAll();
    this.state = "idle";
    this.notBefore = performance.now() + RETRY_AFTER_MS;
  }

  private terminateAll() {
    this.terminate(this.fronts);
  }

  private terminate(fronts: Front[]) {
    for (const f of fronts) f.worker.terminate();
    this.fronts = [];
    this.app.metrics.deliveryThreads.set(0);
  }

  private absorb(front: Front, stats: FrontStats) {
    for (const [id, count, last] of stats.access) this.app.access.add(id, count, last);
    let answered = 0;
    for (const [method, status, durations] of stats.answers) {
      for (const seconds of durations) this.entry.observeImage(method, status, seconds);
      answered += durations.length;
    }
    front.answers.add(answered);
    if (stats.variantHits > 0) this.app.metrics.variantLookups.child({ result: "hit" }).add(stats.variantHits);
  }

  /** A request from a delivery thread: believed only with the secret this process gave it. */
  private handedOver(request: Request): Response | Promise<Response> {
    const given = Buffer.from(request.headers.get(HANDOVER_SECRET_HEADER) ?? "", "hex");
    if (given.length !== this.secret.length || !timingSafeEqual(given, this.secret)) return jsonError(403, "拒绝访问");
    const peer = request.headers.get(HANDOVER_PEER_HEADER) ?? "";
    const counted = request.headers.has(HANDOVER_COUNTED_HEADER);
    for (const name of [HANDOVER_SECRET_HEADER, HANDOVER_PEER_HEADER, HANDOVER_COUNTED_HEADER]) request.headers.delete(name);
    return this.entry.handedOver(restoreTarget(request), peer, counted);
  }

  /**
   * The pending change message: the generation moves now, while the request that made the
   * change is still running, and the message follows in a microtask with all changes of this turn.
   */
  private change(): FrontInvalidate {
    Atomics.add(this.generation, 0, 1);
    if (this.pending) return this.pending;
    const change: FrontInvalidate = { type: "invalidate", generation: 0, images: [], aliases: [], blobs: [] };
    this.pending = change;
    queueMicrotask(() => {
      this.pending = undefined;
      change.generation = Atomics.load(this.generation, 0);
      for (const f of this.fronts) f.worker.postMessage(change);
    });
    return change;
  }

  /** Stops the threads (they finish their in-flight requests, handed-over ones included), then the private listener. */
  async stop() {
    const wasStarting = this.state === "starting";
    this.state = "stopped";
    if (wasStarting) return;
    await askAll(this.fronts, { type: "stop" }, "stopped", STOP_DEADLINE_MS);
    this.terminateAll();
    await this.internal?.server.stop(false);
    this.internal = undefined;
  }
}
