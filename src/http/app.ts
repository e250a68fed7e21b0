import { Elysia } from "elysia";
import type { Server } from "bun";
import type { AppContext } from "../context";
import { HEAD_LENGTH_HEADER } from "../delivery/serve-image";
import { assertAdminRoutesGuarded } from "./access";
import { DomainError } from "../errors";
import type { CountHandle, HistogramHandle } from "../ops/metrics-batch";
import { ApiError, jsonError } from "./errors";
import { BodyBudget, boundSmallBody } from "./body-limit";
import { inSurfaceEnvelope, unknownRoute } from "../compat/envelopes";
import { allowCrossOriginRead, corsPreflight } from "./cors";
import { loggedRequestId, requestIdFor, shareRequestTrace } from "../ops/request-trace";
import { BodyRoutes } from "./json-bodies";
import { answerableError, logCrash } from "./disk-full";
import { proxyMisconfigurationHint } from "./proxy-hint";
import { hasOrigin, routableRequest, withPlaceholderOrigin } from "./raw-url";
import { rawTarget, routedPath } from "../shared/url-target";
import { isSecureRequest, requestInfo, requireUsableHost, resolveClientAddress, setRequestInfo } from "./request-info";
import { buildRouteTable, type RouteTable } from "./route-table";
import { closesConnection } from "./tool-surfaces";
import { closesAfter, drainUnreadBody, LINGER_EXTRA_BYTES } from "./linger";
import { uploadMaxBytes } from "./upload-input";
import { IMAGE_ROUTE, imageFastPath } from "./image-fast-path";
import { authRoutes } from "./routes/auth";
import { configRoutes } from "./routes/config";
import { consoleRoutes } from "./routes/console";
import { systemRoutes } from "./routes/system";
import { tokenRoutes } from "./routes/tokens";
import { userRoutes } from "./routes/users";
import { uploadRoutes } from "./routes/uploads";
import { lskyRoutes } from "./routes/lsky";
import { cheveretoRoutes } from "./routes/chevereto";
import { imageRoutes } from "./routes/images";
import { channelRoutes } from "./routes/channels";
import { channelOAuthRoutes } from "./routes/channel-oauth";
import { opsRoutes } from "./routes/ops";
import { backupRoutes } from "./routes/backups";
import { publicRoutes } from "./routes/public";
import { refererRoutes } from "./routes/referers";
import { reviewRoutes } from "./routes/review";
import { s3Routes } from "../s3/router";
import { getOrCreate } from "../shared/get-or-create";
import { scrapeGauge } from "../ops/metrics";

/** Methods that write nothing a client is told about: their answers wait for no fsync (db/durability.ts). */
const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Paths left out of HTTP metrics (spec 4.12). */
const UNMETERED = new Set(["/healthz", "/metrics"]);

// biome-ignore lint/suspicious/noExplicitAny: extra plugins (tests, compat surfaces) are Elysia instances of any shape
export function createRouter(app: AppContext, extra: Elysia<any, any, any, any, any, any, any>[] = []) {
  const bodyRoutes = new BodyRoutes();
  // The route list for a 405's Allow, built at the first unknown request (all routes are in by then).
  let table: RouteTable | undefined;
  const methodsAt = (path: string) => {
    table ??= buildRouteTable(router.routes);
    return table.methodsAt(path);
  };
  let router = new Elysia()
    // After the parse, because a custom parse hook would also run for `parse: "none"` routes and break them.
    // Both this check and the parse come before the route group's resolve: a refusal authenticates first.
    .onTransform({ as: "global" }, ({ request, route }) => bodyRoutes.check(request, route))
    .onError(({ code, error, request, route }) => {
      // A handler's own error first: its status wins over Elysia's classification.
      if (error instanceof ApiError || error instanceof DomainError) return errorAnswer(app, request, error);
      // Not JSON: the route's own 401/403 still come first (json-bodies.ts), then the 400.
      if (code === "PARSE") return errorAnswer(app, request, bodyRoutes.refusal(request, route));
      // Unknown paths and methods under /api/v1/ and /api/1/ too: their clients read only their own error shape.
      if (code === "NOT_FOUND") {
        const path = routedPath(rawTarget(request.url).path);
        return unknownRoute(path, request.method, methodsAt(path));
      }
      if (code === "VALIDATION") return jsonError(400, "请求参数无效");
      return errorAnswer(app, request, error);
    })
    .use(systemRoutes(app))
    .use(consoleRoutes())
    .use(authRoutes(app))
    .use(userRoutes(app))
    .use(configRoutes(app))
    .use(tokenRoutes(app))
    .use(uploadRoutes(app))
    .use(lskyRoutes(app))
    .use(cheveretoRoutes(app))
    .use(imageRoutes(app))
    .use(channelRoutes(app))
    .use(channelOAuthRoutes(app))
    .use(publicRoutes(app))
    .use(refererRoutes(app))
    .use(reviewRoutes(app))
    .use(opsRoutes(app))
    .use(backupRoutes(app))
    .use(s3Routes(app));
  for (const plugin of extra) router = router.use(plugin);
  bodyRoutes.learn(router.routes);
  assertAdminRoutesGuarded(router.routes);
  return router;
}

/** A handler's error as the client sees it: its own status, 503 for a full disk, else a logged 500. */
function errorAnswer(app: AppContext, request: Request, error: unknown): Response {
  const e = answerableError(app.log, request, error);
  if (e) return jsonError(e.status, e.message, e.headers);
  logCrash(app.log, request, error);
  return jsonError(500, `服务器内部错误（请求编号 ${requestIdFor(request)}，可据此在服务日志中查找）`);
}

export type Router = ReturnType<typeof createRouter>;

/**
 * HTTP metrics with the label set of each (method, route, status) resolved once: a request
 * then costs two Map lookups and a few additions (metrics-batch.ts), not label hashing.
 */
function requestMeters(app: AppContext) {
  const byMethod = new Map<string, Map<string, { timer: HistogramHandle; counters: Map<number, CountHandle> }>>();
  return {
    observe(method: string, route: string, status: number, seconds: number) {
      const routes = getOrCreate(byMethod, method, () => new Map());
      const series = getOrCreate(routes, route, () => ({
        timer: app.metrics.httpDuration.series({ method, route }),
        counters: new Map<number, CountHandle>(),
      }));
      const counter = getOrCreate(series.counters, status, () => app.metrics.httpCounts.child({ method, route, status: String(status) }));
      counter.inc();
      series.timer.observe(seconds);
    },
  };
}

/** The HTTP entry points of the main thread (serve.ts wires them to listeners). */
export interface HttpEntry {
  /** Bun.serve's fetch for the public listener. */
  fetch: (received: Request, server: Server<undefined>) => Response | Promise<Response>;
  /**
   * A request a delivery thread handed over (threads/pool.ts): `peer` is the TCP peer the
   * thread saw, `counted` says the thread already counted the image access.
   */
  handedOver: (received: Request, peer: string, counted: boolean) => Response | Promise<Response>;
  /** Records an `/i/` answer a delivery thread gave itself, in the same request metrics. */
  observeImage: (method: string, status: number, seconds: number) => void;
  /** Calls `listener` with the start time of every fast-path `/i/` request (the threads' load trigger). */
  watchDeliveries: (listener: (started: number) => void) => void;
}

/**
 * The Bun.serve fetch handler around the router: resolves the client address once,
 * records request metrics by route template, and adds nosniff to every response.
 * `/i/` delivery skips the router and the client address (see image-fast-path.ts).
 */
export function createFetchHandler(app: AppContext, router: Router): HttpEntry {
  const routes = buildRouteTable(router.routes.map((r) => ({ method: r.method, path: r.path })));
  const meters = requestMeters(app);
  const hintProxy = proxyMisconfigurationHint(app.bootstrap.trustedProxies, app.log);
  const fastImage = imageFastPath(app);
  const bodyBudget = new BodyBudget();
  scrapeGauge(app.metrics.registry, "kura_http_body_bytes_held", "正在接收、尚未处理完的小请求体（JSON、表单）占用的内存字节数", () => bodyBudget.held().bytes);
  let onDelivery: ((started: number) => void) | undefined;

  /** Headers every response gets, then the metrics. */
  const finish = (request: Request, path: string, response: Response, route: string | undefined, started: number) => {
    response.headers.set("x-content-type-options", "nosniff");
    allowCrossOriginRead(request, path, response);
    // A request a line was logged about says which (the line has the same request_id).
    const logged = loggedRequestId(request);
    if (logged !== undefined) response.headers.set("x-request-id", logged);
    if (closesConnection(path)) response.headers.set("connection", "close");
    const headLength = response.headers.get(HEAD_LENGTH_HEADER);
    if (headLength !== null) {
      response.headers.delete(HEAD_LENGTH_HEADER);
      if (request.method === "HEAD") response.headers.set("content-length", headLength);
    }
    // Bun dates only answers with a body. S3 clients take the server's clock from Date to correct
    // their own skew: the AWS SDK's HeadObject/HeadBucket failed RequestTimeTooSkewed for good.
    if (request.method === "HEAD" && !response.headers.has("date")) response.headers.set("date", new Date().toUTCString());
    if (!UNMETERED.has(path)) {
      meters.observe(request.method, route ?? routes.match(request.method, path) ?? "unmatched", response.status, (performance.now() - started) / 1000);
    }
    return response;
  };

  const routed = async (received: Request, peer: string, started: number): Promise<Response> => {
    // From here on the router, the body cap, the S3 surface and the metrics share one path.
    const request = routableRequest(received);
    const path = routedPath(rawTarget(request.url).path);
    const trusted = app.bootstrap.trustedProxies;
    hintProxy(peer, request.headers);
    const info = { peer, client: resolveClientAddress(peer, request.headers, trusted), secure: isSecureRequest(request, peer, trusted) };
    setRequestInfo(request, info);
    let response: Response;
    try {
      requireUsableHost(request, path);
      const preflight = corsPreflight(request, path);
      if (preflight) return finish(request, path, preflight, undefined, started);
      const bounded = await boundSmallBody(request, path, bodyBudget, info.client);
      if (bounded instanceof Response) response = await inSurfaceEnvelope(path, bounded);
      else {
        try {
          if (bounded.request !== request) {
            setRequestInfo(bounded.request, info);
            shareRequestTrace(request, bounded.request);
          }
          response = await router.handle(bounded.request);
        } finally {
          bounded.release();
        }
      }
    } catch (err) {
      response = await inSurfaceEnvelope(path, errorAnswer(app, request, err));
    }
    // An error answer promises nothing stored (and a storage fault would be logged twice).
    if (response.status < 400 && !READS.has(request.method)) response = await durable(request, path, response);
    // A refusal that left the body unread (Lsky's come as 200s) reads it first: see linger.ts.
    if (!READS.has(request.method) && closesAfter(path, response)) await drainUnreadBody(request, path, response, uploadMaxBytes(app) + LINGER_EXTRA_BYTES);
    return finish(request, path, response, requestInfo(request).route, started);
  };

  /** A write's answer once what it committed is on disk; the storage's 503 if it cannot be made so. */
  const durable = async (request: Request, path: string, response: Response): Promise<Response> => {
    try {
      await app.durability.barrier();
      return response;
    } catch (err) {
      void response.body?.cancel().catch(() => {});
      return inSurfaceEnvelope(path, errorAnswer(app, request, err));
    }
  };

  /** Fast-path answers carry nosniff and their real length already: only the metrics are left. */
  const finishImage = (request: Request, response: Response, started: number) => {
    if (response.status >= 500) {
      const logged = loggedRequestId(request);
      if (logged !== undefined) response.headers.set("x-request-id", logged);
    }
    meters.observe(request.method, IMAGE_ROUTE, response.status, (performance.now() - started) / 1000);
    onDelivery?.(started);
    return response;
  };

  const handle = (sent: Request, peerOf: () => string, counted: boolean): Response | Promise<Response> => {
    const started = performance.now();
    // No usable Host: Bun's URL is the bare target, which nothing downstream can parse (raw-url.ts).
    const received = hasOrigin(sent.url) ? sent : withPlaceholderOrigin(sent);
    const { path, query } = rawTarget(received.url);
    let delivered: Response | Promise<Response> | undefined;
    try {
      delivered = fastImage(received, path, query, counted);
    } catch (err) {
      return finish(received, path, errorAnswer(app, received, err), IMAGE_ROUTE, started);
    }
    if (!delivered) return routed(received, peerOf(), started);
    // The one-time reverse-proxy hint needs the peer only when the header is there.
    if (received.headers.has("x-forwarded-for")) hintProxy(peerOf(), received.headers);
    // A hot image is answered synchronously: no promise, no extra turn of the microtask queue.
    if (delivered instanceof Response) return finishImage(received, delivered, started);
    return delivered.then(
      (response) => finishImage(received, response, started),
      (err: unknown) => finish(received, path, errorAnswer(app, received, err), IMAGE_ROUTE, started),
    );
  };

  return {
    fetch: (received, server) => handle(received, () => server.requestIP(received)?.address ?? "", false),
    handedOver: (received, peer, counted) => handle(received, () => peer, counted),
    observeImage: (method, status, seconds) => meters.observe(method, IMAGE_ROUTE, status, seconds),
    watchDeliveries: (listener) => {
      onDelivery = listener;
    },
  };
}
