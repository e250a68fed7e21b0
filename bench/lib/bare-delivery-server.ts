// The Bun floor of bench/delivery.ts: a bare `Bun.serve` answering `/original.jpg` and
// `/variant.webp` with the same bytes and headers Kura sends, held in memory, with the same listeners
// Kura runs (main thread plus `reusePort` Workers, like its delivery threads). No routing,
// no lookups, no counters: what any Bun server on this machine pays per response. When Kura
// is close to this and both are below nginx, the gap is in Bun's HTTP stack (it copies the
// body through user memory where nginx uses sendfile), not in Kura's code.
//
// Env: BARE_DELIVERY_DIR (holds original.jpg and variant.webp, and for each `<name>.headers.json`,
// the response headers to send with it), BARE_DELIVERY_WORKERS (extra listeners). Prints its
// address once every listener is up.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { parseDeliveryThreads } from "../../src/config/bootstrap";
import { BenchServer } from "./server";

const READY = /bare delivery server listening on (\S+)/;

/** Delivery threads Kura runs beside its main thread with this environment (Kura's own reading of it). */
export function kuraDeliveryThreads(): number {
  return parseDeliveryThreads(process.env.KURA_DELIVERY_THREADS, availableParallelism()).count;
}

export interface BunFloor {
  server: BenchServer;
  dispose(): Promise<void>;
}

/** Starts the floor as its own process, serving each file with the headers Kura answered it with. */
export async function startBunFloor(files: Record<string, { bytes: Uint8Array; headers: Headers }>): Promise<BunFloor> {
  const dir = mkdtempSync(join(tmpdir(), "kura-bench-floor-"));
  for (const [name, { bytes, headers }] of Object.entries(files)) {
    writeFileSync(join(dir, name), bytes);
    // Everything Kura sent except what Bun sets itself for every answer.
    const kept = Object.fromEntries([...headers].filter(([k]) => !["content-length", "date", "connection", "keep-alive"].includes(k)));
    writeFileSync(join(dir, `${name}.headers.json`), JSON.stringify(kept));
  }
  const server = await BenchServer.start({
    entry: import.meta.path,
    ready: READY,
    env: { BARE_DELIVERY_DIR: dir, BARE_DELIVERY_WORKERS: String(kuraDeliveryThreads()) },
  });
  return {
    server,
    async dispose() {
      await server.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Init {
  dir: string;
  port: number;
}

function listen(dir: string, port: number) {
  const file = (name: string) => ({
    // A Blob, as Kura's hot bytes: `new Response(blob)` shares the bytes instead of copying them.
    bytes: new Blob([readFileSync(join(dir, name))]),
    // Kura's own headers for this image, so both answers carry the same bytes on the wire.
    headers: new Headers(JSON.parse(readFileSync(join(dir, `${name}.headers.json`), "utf8")) as Record<string, string>),
  });
  const original = file("original.jpg");
  const variant = file("variant.webp");
  return Bun.serve({
    hostname: "127.0.0.1",
    port,
    reusePort: true,
    fetch(req) {
      const path = req.url.slice(req.url.indexOf("/", 8));
      const body = path === "/original.jpg" ? original : path === "/variant.webp" ? variant : undefined;
      return body ? new Response(body.bytes, { headers: body.headers }) : new Response("not found", { status: 404 });
    },
  });
}

declare const self: Worker;

if (!Bun.isMainThread) {
  self.onmessage = (event: MessageEvent<Init>) => {
    listen(event.data.dir, event.data.port);
    self.postMessage("listening");
  };
} else if (import.meta.main) {
  const dir = process.env.BARE_DELIVERY_DIR;
  if (!dir) throw new Error("需要 BARE_DELIVERY_DIR");
  const workers = Number(process.env.BARE_DELIVERY_WORKERS ?? 0);
  const server = listen(dir, 0);
  const started = Array.from({ length: workers }, () => {
    const worker = new Worker(import.meta.path);
    const up = new Promise<void>((resolve) => worker.addEventListener("message", () => resolve(), { once: true }));
    worker.postMessage({ dir, port: server.port ?? 0 } satisfies Init);
    return up;
  });
  await Promise.all(started);
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  console.log(`bare delivery server listening on 127.0.0.1:${server.port}`);
}
