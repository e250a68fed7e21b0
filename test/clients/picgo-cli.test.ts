/**
 * The PicGo CLI (what Typora runs) with picgo-plugin-web-uploader or picgo-plugin-lankong,
 * configured exactly as the README says, run as its own Node process: it must print the link
 * and exit promptly instead of waiting for the server to drop its keep-alive socket (was ~120 s).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { makeJpeg } from "../helpers/images";
import { picgoHome, sha256, startClientFixture, type ClientFixture } from "./fixture";

const PICGO_BIN = resolve(import.meta.dir, "../../node_modules/picgo/bin/picgo");
/** The bound, measured from the moment the link is printed (start-up time on a loaded machine does not count). */
const EXIT_AFTER_UPLOAD_MS = 2_000;

/** Runs `picgo upload <file>` under Node; notes when the link was printed and when the process ended. */
async function runPicgo(config: string, file: string) {
  const proc = Bun.spawn(["node", PICGO_BIN, "-c", config, "upload", file], { stdout: "pipe", stderr: "pipe" });
  const killer = setTimeout(() => proc.kill(), 30_000);
  let output = "";
  let printedAt = 0;
  const decoder = new TextDecoder();
  const stderr = new Response(proc.stderr as ReadableStream<Uint8Array>).text();
  for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
    output += decoder.decode(chunk, { stream: true });
    if (!printedAt && /\/i\/[0-9A-Za-z]{10}(\.[a-z]+)?\s/.test(output)) printedAt = performance.now();
  }
  const code = await proc.exited;
  const exitedAt = performance.now();
  clearTimeout(killer);
  return { output, stderr: await stderr, code, printedAt, exitedAt };
}

describe("PicGo CLI with picgo-plugin-web-uploader and picgo-plugin-lankong", () => {
  let f: ClientFixture;
  beforeAll(async () => {
    f = await startClientFixture();
  });
  afterAll(async () => {
    await f.dispose();
  });

  /** README "Lsky Pro (兰空图床) V2 compatible API", PicGo config. */
  const lankongConfig = () =>
    picgoHome(f.dir, "picgo-plugin-lankong", {
      picBed: {
        current: "lankong",
        uploader: "lankong",
        lankong: { lskyProVersion: "V2", server: f.server.base, token: `Bearer ${f.token}`, permission: 1, ignoreCertErr: false, syncDelete: true },
      },
      picgoPlugins: { "picgo-plugin-lankong": true },
    });

  test("uploads, prints a working link and exits within 2 s after the upload", async () => {
    const jpeg = await makeJpeg(64, 40, 7);
    const file = join(f.dir, "typora.jpg");
    writeFileSync(file, jpeg);
    // README "Uploading from tools", PicGo with the web-uploader plugin.
    const config = picgoHome(f.dir, "picgo-plugin-web-uploader", {
      picBed: {
        current: "web-uploader",
        uploader: "web-uploader",
        "web-uploader": {
          url: f.server.url("/api/upload"),
          paramName: "file",
          jsonPath: "url",
          customHeader: JSON.stringify({ Authorization: `Bearer ${f.token}` }),
          customBody: JSON.stringify({ exif_policy: "strip" }),
        },
      },
      picgoPlugins: { "picgo-plugin-web-uploader": true },
    });
    const { output, code, printedAt, exitedAt } = await runPicgo(config, file);
    expect(output).toContain("[PicGo SUCCESS]");
    expect(printedAt).toBeGreaterThan(0);
    expect(code).toBe(0);
    expect(exitedAt - printedAt).toBeLessThan(EXIT_AFTER_UPLOAD_MS);

    const url = output.match(/(http:\/\/\S+\/i\/[0-9A-Za-z]{10})\s/)![1]!;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(sha256(await res.arrayBuffer())).toBe(sha256(jpeg));
  }, 60_000);

  test("picgo-plugin-lankong (Lsky Pro V2) from the CLI: the .jpg link serves the bytes and the process exits promptly", async () => {
    const jpeg = await makeJpeg(50, 50, 8);
    const file = join(f.dir, "lankong-cli.jpg");
    writeFileSync(file, jpeg);
    const config = lankongConfig();
    const { output, code, printedAt, exitedAt } = await runPicgo(config, file);
    expect(code).toBe(0);
    expect(printedAt).toBeGreaterThan(0);
    expect(exitedAt - printedAt).toBeLessThan(EXIT_AFTER_UPLOAD_MS);
    const url = output.match(/(http:\/\/\S+\/i\/[0-9A-Za-z]{10}\.jpg)\s/)![1]!;
    expect(sha256(await (await fetch(url)).arrayBuffer())).toBe(sha256(jpeg));
  }, 60_000);

  test("picgo-plugin-lankong from the CLI: a refused upload (a text file) shows Kura's Chinese message, not 'status code 415'", async () => {
    const file = join(f.dir, "notes.png");
    writeFileSync(file, "not an image at all");
    const config = lankongConfig();
    const { output, stderr } = await runPicgo(config, file);
    const all = output + stderr;
    // The plugin throws `new Error(body.message)` only for a 2xx answer with status false (axios rejects the
    // rest, and the CLI then prints "Request failed with status code 415" with the message buried in a dump).
    expect(all).toContain("[PicGo ERROR]: Error: 不支持的图片格式");
    expect(all).not.toContain("status code");
    expect(all).not.toMatch(/\/i\/[0-9A-Za-z]{10}/);
  }, 60_000);
});
