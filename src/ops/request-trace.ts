/**
 * A request's id, made only when a line is logged about it: the answer then carries it as
 * `X-Request-Id` (a 500 names it in its message too), so "服务器内部错误" a user reports can be found
 * in the log. An id a proxy sent (nginx's `$request_id`) is used as it is when it is plain text,
 * so one id ties the proxy's log to Kura's. Requests nothing is logged about cost one WeakMap miss.
 */
import { randomBytes } from "node:crypto";

interface Trace {
  id?: string;
}

const traces = new WeakMap<Request, Trace>();
const PLAIN_ID = /^[A-Za-z0-9._-]{1,64}$/;

function traceOf(request: Request): Trace {
  let trace = traces.get(request);
  if (!trace) {
    trace = {};
    traces.set(request, trace);
  }
  return trace;
}

/** `to` is the same request as `from` (a copy the router handles): they share one id. */
export function shareRequestTrace(from: Request, to: Request): void {
  if (from !== to) traces.set(to, traceOf(from));
}

/** The request's id, made now if it has none. */
export function requestIdFor(request: Request): string {
  const trace = traceOf(request);
  if (trace.id === undefined) {
    const sent = request.headers.get("x-request-id");
    trace.id = sent && PLAIN_ID.test(sent) ? sent : randomBytes(8).toString("hex");
  }
  return trace.id;
}

/** The id a logged line gave the request, if any. */
export function loggedRequestId(request: Request): string | undefined {
  return traces.get(request)?.id;
}
