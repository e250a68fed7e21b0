// The reference server of bench/upload.ts: a bare Bun HTTP server doing the least work any
// upload over HTTP needs and nothing else: multipart parsing, sha256, sharp metadata and an
// fsync'd write of the file. No auth, no database, no channels. Run as its own process
// (like Kura) so both sides pay the same HTTP and scheduling costs; the bench reads the
// port from the ready line and the process CPU from /proc.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { writeDurably } from "./upload-baseline";

export const BARE_READY = /bare upload server listening on (\S+)/;

if (import.meta.main) {
  const dir = mkdtempSync(join(tmpdir(), "kura-bench-bare-"));
  let seq = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 64 * 1024 * 1024,
    async fetch(req) {
      if (req.method !== "POST") return new Response("not found", { status: 404 });
      const form = await req.formData();
      const file = form.get("file");
      if (!(file instanceof Blob)) return Response.json({ error: "no file" }, { status: 400 });
      const bytes = new Uint8Array(await file.arrayBuffer());
      const sha = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
      const meta = await sharp(bytes).metadata();
      if (!meta.width || !meta.height) return Response.json({ error: "not an image" }, { status: 400 });
      await writeDurably(join(dir, `${++seq}-${sha}`), bytes);
      return Response.json({ id: sha.slice(0, 12), width: meta.width, height: meta.height, size: bytes.byteLength });
    },
  });
  const stop = () => {
    server.stop(true);
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  console.log(`bare upload server listening on 127.0.0.1:${server.port}`);
}
