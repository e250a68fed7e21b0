// Delivery threads (README "Delivery threads"): with KURA_DELIVERY_THREADS a Worker listens on the
// public port beside the main thread and the kernel spreads connections over both. Every request
// here goes on a fresh connection (Connection: close), so each test's requests land on both
// threads; the thread's own answers are visible in kura_delivery_thread_answers_total.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { adminSession, expectError } from "../helpers/client";
import { useAdmin, useServer } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { settled } from "../helpers/settle";
import { KuraServer } from "../helpers/server";

const FRESH = { connection: "close" };
const THREAD_ANSWERS = 'kura_delivery_thread_answers_total{thread="1"}';

/** `n` requests, each on its own connection, in small parallel groups. */
async function many(n: number, request: (i: number) => Promise<Response>): Promise<Response[]> {
  const out: Response[] = [];
  for (let i = 0; i < n; i += 8) {
    const group = await Promise.all(Array.from({ length: Math.min(8, n - i) }, (_, j) => request(i + j)));
    out.push(...group);
  }
  return out;
}

describe("with one delivery thread", () => {
  const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: "1" } });

  const upload = async (seed: number) => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000, exif_policy: "passthrough", process_widths: [32, 640] });
    const png = await makePng(64, 48, seed);
    const up = await admin.json("POST", "/api/admin/upload", form(png, `t${seed}.png`));
    return { id: up.id as string, png };
  };

  test("the thread answers /i/ from memory with the same bytes and headers as the main thread", async () => {
    const { id, png } = await upload(1);
    const before = await metricValue(server.url(""), THREAD_ANSWERS);
    const answers = await many(48, () => fetch(server.url(`/i/${id}`), { headers: FRESH }));
    const shapes = new Set<string>();
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(png))).toBe(true);
      shapes.add(["etag", "cache-control", "content-type", "x-content-type-options", "accept-ranges"].map((h) => res.headers.get(h)).join("|"));
    }
    expect(shapes.size).toBe(1);
    const served = await settled(
      () => metricValue(server.url(""), THREAD_ANSWERS),
      (n) => n > before,
    );
    // The first request a thread gets for an image is handed over (its answer fills the thread's memory).
    expect(served - before).toBeGreaterThan(0);
    expect(served - before).toBeLessThan(48);
    expect(await metricValue(server.url(""), "kura_delivery_threads")).toBe(1);
  });

  test("HEAD lengths, 304s, ranges and variants are the same on either thread", async () => {
    const { id, png } = await upload(2);
    const etag = (await fetch(server.url(`/i/${id}`))).headers.get("etag")!;
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { method: "HEAD", headers: FRESH }))) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-length")).toBe(String(png.byteLength));
      // RFC 9110 6.6.1; Bun dates only answers with a body.
      expect(res.headers.get("date")).not.toBeNull();
    }
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { headers: { ...FRESH, "if-none-match": etag } }))) {
      expect(res.status).toBe(304);
      expect(res.headers.get("date")).not.toBeNull();
    }
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { headers: { ...FRESH, range: "bytes=0-9" } }))) {
      expect(res.status).toBe(206);
      expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(png.subarray(0, 10)))).toBe(true);
    }
    const variants = await many(16, () => fetch(server.url(`/i/${id}?w=32`), { headers: { ...FRESH, accept: "image/webp" } }));
    const bodies = new Set<string>();
    for (const res of variants) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("image/webp");
      bodies.add(Buffer.from(await res.arrayBuffer()).toString("base64"));
    }
    expect(bodies.size).toBe(1);
    // A bad parameter is the main thread's JSON 400 whichever thread got it.
    for (const res of await many(8, () => fetch(server.url(`/i/${id}?w=abc`), { headers: FRESH }))) await expectError(res, 400);
  });

  test("every GET a thread answers is counted once, none twice", async () => {
    await admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
    const { id } = await upload(3);
    await many(40, () => fetch(server.url(`/i/${id}`), { headers: FRESH }));
    await many(10, () => fetch(server.url(`/i/${id}`), { method: "HEAD", headers: FRESH })); // HEAD does not count
    const image = await settled(
      () => admin.json("GET", `/api/admin/images/${id}`),
      (d) => d.access_count >= 40,
    );
    await Bun.sleep(1300); // one more flush: a double count would show now
    expect((await admin.json("GET", `/api/admin/images/${id}`)).access_count).toBe(40);
    expect(image.access_count).toBe(40);
  });

  test("a deleted image is not served by any thread once the DELETE has answered", async () => {
    const { id } = await upload(4);
    await many(24, () => fetch(server.url(`/i/${id}`), { headers: FRESH })); // hot on both threads
    const del = await admin.request("DELETE", `/api/admin/images/${id}`);
    expect(del.status).toBeLessThan(300);
    for (const res of await many(48, () => fetch(server.url(`/i/${id}`), { headers: FRESH }))) expect(res.status).toBe(404);
  });

  test("a hotlink rule change applies on every thread to the very next request", async () => {
    const { id } = await upload(5);
    const foreign = { ...FRESH, referer: "https://elsewhere.example/page" };
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { headers: foreign }))) expect(res.status).toBe(200);
    const rule = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "friend.example" }, 201);
    for (const res of await many(32, () => fetch(server.url(`/i/${id}`), { headers: foreign }))) expect(res.status).toBe(403);
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { headers: { ...FRESH, referer: "https://friend.example/x" } }))) {
      expect(res.status).toBe(200);
    }
    await admin.request("DELETE", `/api/admin/referer-whitelist/${rule.id}`);
    for (const res of await many(16, () => fetch(server.url(`/i/${id}`), { headers: foreign }))) expect(res.status).toBe(200);
  });

  test("a settings change applies on every thread to the very next request", async () => {
    const { id } = await upload(6);
    await many(16, () => fetch(server.url(`/i/${id}?w=32`), { headers: { ...FRESH, accept: "image/webp" } }));
    await admin.json("PUT", "/api/admin/config", { process_formats: ["jpeg"] });
    for (const res of await many(24, () => fetch(server.url(`/i/${id}?w=32`), { headers: { ...FRESH, accept: "image/webp" } }))) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).not.toBe("image/webp");
    }
    await admin.json("PUT", "/api/admin/config", { process_formats: ["webp", "jpeg", "png", "avif"] });
  });

  test("handed-over requests keep everything: uploads, JSON bodies, the body cap, tool-surface Connection: close", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const up = await admin.request("POST", "/api/admin/upload", form(await makePng(20, 20, 100 + i), `h${i}.png`), FRESH);
      expect(up.status).toBe(200);
      ids.add(((await up.json()) as { id: string }).id);
    }
    expect(ids.size).toBe(8);
    // A JSON body over the 1 MiB cap is refused while streaming, on either thread.
    const big = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) });
    for (const res of await many(6, () =>
      fetch(server.url("/api/admin/auth/login"), { method: "POST", headers: { ...FRESH, "content-type": "application/json" }, body: big }),
    )) {
      await expectError(res, 413);
    }
    // Tool surfaces close their connection (a client pool must not reuse it): kept through the handover.
    for (const res of await many(8, () => fetch(server.url("/api/v1/upload"), { method: "POST", headers: FRESH }))) {
      expect(res.headers.get("connection")).toBe("close");
    }
  });

  test("the client address seen by the main thread is the thread's TCP peer; handover headers from outside are ignored", async () => {
    const forged = { ...FRESH, "x-kura-handover-peer": "10.9.9.9", "x-kura-handover-secret": "00".repeat(32), "x-kura-handover-counted": "1" };
    for (const res of await many(16, () => fetch(server.url("/api/admin/me"), { headers: forged }))) await expectError(res, 401);
    // /metrics is allowed for loopback (the default list): the real peer, not the forged one, decides.
    for (const res of await many(16, () => fetch(server.url("/metrics"), { headers: forged }))) expect(res.status).toBe(200);
  });

  test("the private handover socket answers 403 to anyone without this process's secret", async () => {
    // An abstract unix socket has no file permissions: any local process can connect, so the
    // secret is its only lock. Found the way such a process would: in /proc/net/unix.
    const socket = handoverSocketOf(server.proc.pid);
    expect(socket).toBeDefined();
    const ask = (path: string, init: RequestInit = {}) => fetch(`http://localhost${path}`, { ...init, unix: socket } as RequestInit);
    await expectError(await ask("/healthz"), 403);
    await expectError(await ask("/api/admin/me", { headers: { "x-kura-handover-secret": "00".repeat(32), "x-kura-handover-peer": "127.0.0.1" } }), 403);
    const login = {
      method: "POST",
      headers: { "content-type": "application/json", "x-kura-handover-secret": "zz" },
      body: JSON.stringify({ username: "admin", password: "x" }),
    };
    await expectError(await ask("/api/admin/login", login), 403);
  });
});

/** The abstract socket (`\0kura-<pid>-…`) a Kura process started under `rootPid` listens on for its delivery threads. */
function handoverSocketOf(rootPid: number): string | undefined {
  const descends = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 8; hops++) {
      if (p === rootPid) return true;
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      p = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    }
    return false;
  };
  for (const line of readFileSync("/proc/net/unix", "utf8").split("\n")) {
    const m = /@(kura-(\d+)-[0-9a-f]+)$/.exec(line.trim());
    if (m && existsSync(`/proc/${m[2]}`) && descends(Number(m[2]))) return `\0${m[1]}`;
  }
  return undefined;
}

describe("client address rules through a delivery thread", () => {
  const { server } = useServer({ env: { KURA_DELIVERY_THREADS: "1", KURA_METRICS_ALLOW: "10.0.0.0/8", KURA_TRUSTED_PROXIES: "127.0.0.1" } });

  test("X-Forwarded-For from the trusted proxy decides; a forged thread peer does not", async () => {
    const scrape = (headers: Record<string, string>) => many(16, () => fetch(server.url("/metrics"), { headers: { ...FRESH, ...headers } }));
    for (const res of await scrape({ "x-forwarded-for": "10.1.2.3" })) expect(res.status).toBe(200);
    for (const res of await scrape({ "x-forwarded-for": "203.0.113.7" })) expect(res.status).toBe(403);
    for (const res of await scrape({ "x-forwarded-for": "203.0.113.7", "x-kura-handover-peer": "10.1.2.3" })) expect(res.status).toBe(403);
  });
});

// `auto` means cores − 1 threads: none on a one-core machine.
describe.skipIf(availableParallelism() < 2)("auto mode", () => {
  const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: "auto" } });

  test("an idle server runs no delivery thread; busy /i/ traffic starts them", async () => {
    expect(await metricValue(server.url(""), "kura_delivery_threads")).toBe(0);
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(16, 16, 7), "a.png"));
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 80; i++) await (await fetch(server.url(`/i/${up.id}`))).arrayBuffer();
      }),
    );
    const threads = await settled(
      () => metricValue(server.url(""), "kura_delivery_threads"),
      (n) => n > 0,
    );
    expect(threads).toBeGreaterThan(0);
    await server.waitForLog(/投递线程已启动/);
  });
});

describe("start and stop", () => {
  test("with threads enabled, a port another server holds still fails the start (SO_REUSEPORT does not share it)", async () => {
    const first = await KuraServer.start({ env: { KURA_DELIVERY_THREADS: "1" } });
    try {
      const port = new URL(first.url("/")).port;
      const second = KuraServer.start({ env: { KURA_DELIVERY_THREADS: "1", KURA_LISTEN: `127.0.0.1:${port}` } });
      await expect(second).rejects.toThrow(/无法监听端口/);
    } finally {
      await first.dispose();
    }
  });

  test("SIGTERM stops the threads and the server cleanly", async () => {
    const server = await KuraServer.start({ env: { KURA_DELIVERY_THREADS: "2" } });
    const admin = await adminSession(server);
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(16, 16, 8), "a.png"));
    await many(16, () => fetch(server.url(`/i/${up.id}`), { headers: FRESH }));
    expect(await server.stop("SIGTERM")).toBe(0);
    expect(server.logs).toContain("已关闭");
    await server.dispose();
  });
});

// The window between a change's answer and a thread applying it lasts well under a millisecond,
// so the tests above cannot tell whether the generation check (protocol.ts) or plain luck kept
// stale answers out. Here every thread applies changes 400 ms late (test hook): a request in
// that window is answered right only because the thread sees the new generation and hands it over.
describe("with one delivery thread that applies changes late (test hook)", () => {
  const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: "1", KURA_TEST_HOOKS: "front.apply-late" } });

  /**
   * An image the thread answers from its own memory at `suffix` with `headers`: the thread's
   * answer count must grow while it is requested, which also shows the thread has applied every
   * change so far (until then it hands everything over).
   */
  const hotImage = async (seed: number, suffix = "", headers: Record<string, string> = {}) => {
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(64, 48, seed), `late${seed}.png`));
    const before = await metricValue(server.url(""), THREAD_ANSWERS);
    const answered = await settled(
      async () => {
        await many(16, () => fetch(server.url(`/i/${up.id}${suffix}`), { headers: { ...FRESH, ...headers } }));
        return metricValue(server.url(""), THREAD_ANSWERS);
      },
      (n) => n > before,
    );
    expect(answered).toBeGreaterThan(before);
    return up.id as string;
  };

  /** `n` requests started at once, each on its own connection: all inside the 400 ms window. */
  const burst = (n: number, url: string, headers: Record<string, string>) =>
    Promise.all(Array.from({ length: n }, () => fetch(server.url(url), { headers: { ...FRESH, ...headers } })));

  test("a thread that has not applied a delete, a rule or a setting yet hands /i/ over instead of answering stale", async () => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000, exif_policy: "passthrough", process_widths: [32, 640] });
    const deleted = await hotImage(31);
    await admin.request("DELETE", `/api/admin/images/${deleted}`);
    expect((await burst(24, `/i/${deleted}`, {})).map((r) => r.status)).toEqual(Array(24).fill(404));

    const guarded = await hotImage(32);
    const foreign = { referer: "https://elsewhere.example/page" };
    const rule = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "friend.example" }, 201);
    expect((await burst(24, `/i/${guarded}`, foreign)).map((r) => r.status)).toEqual(Array(24).fill(403));
    await admin.request("DELETE", `/api/admin/referer-whitelist/${rule.id}`);

    const webp = { accept: "image/webp" };
    const resized = await hotImage(33, "?w=32", webp);
    const before = await many(16, () => fetch(server.url(`/i/${resized}?w=32`), { headers: { ...FRESH, ...webp } }));
    expect(before.map((r) => r.headers.get("content-type"))).toEqual(Array(16).fill("image/webp"));
    await admin.json("PUT", "/api/admin/config", { process_formats: ["jpeg"] });
    for (const res of await burst(24, `/i/${resized}?w=32`, webp)) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).not.toBe("image/webp");
    }
  });
});
