import { expect, test } from "bun:test";
import { adminSession, expectError } from "../helpers/client";
import { KuraServer } from "../helpers/server";
import { memoryOf } from "./hardening.helpers";

test("a 1 GiB streamed upload is refused with 413 without growing the server's memory by more than the cap", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const capMb = 64;
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: capMb });
    // Warm up the upload path once so lazily loaded code does not count as growth.
    await admin.request("POST", "/api/admin/upload", new FormData());
    const before = memoryOf(server).hwm;

    const boundary = "kura1gib";
    const chunk = new Uint8Array(1024 * 1024).fill(0x41);
    let sent = 0;
    const total = 1024 * 1024 * 1024;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.jpg"\r\n\r\n`));
      },
      pull(controller) {
        if (sent >= total) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    // No Content-Length: the server must notice the cap while streaming.
    const res = await fetch(server.url("/api/admin/upload"), {
      method: "POST",
      headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": `multipart/form-data; boundary=${boundary}` },
      body,
      duplex: "half",
    } as RequestInit);
    await expectError(res, 413);
    const growth = memoryOf(server).hwm - before;
    if (process.env.KURA_TEST_VERBOSE) console.log({ growth, sent });
    expect(growth).toBeLessThan(capMb * 1024 * 1024);
    // The server stopped reading long before the gigabyte was through.
    expect(sent).toBeLessThan(total / 4);
    // And it still serves.
    expect((await fetch(server.url("/healthz"))).status).toBe(200);
  } finally {
    await server.dispose();
  }
}, 120_000);
