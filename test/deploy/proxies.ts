/**
 * Real reverse proxies in front of a real Kura, built from the shipped files in deploy/:
 * deploy/nginx.conf and deploy/Caddyfile are read and adapted to loopback ports (and,
 * for nginx, a throwaway certificate); every other line is used as shipped.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePorts } from "../helpers/ports";

export const DEPLOY_DIR = resolve(import.meta.dir, "../../deploy");

export interface RunningProxy {
  name: string;
  /** The public address clients use, e.g. https://127.0.0.1:40123 */
  origin: string;
  /** PEM file clients must trust for `origin`. */
  caFile: string;
  logs(): string;
  dispose(): Promise<void>;
}

export function which(name: string): string | null {
  return Bun.which(name) ?? Bun.which(name, { PATH: "/usr/sbin:/sbin:/usr/bin:/bin" });
}

/** Replaces one exact piece of the shipped file; throws if it is gone, so the adaptation never silently drifts. */
function swap(text: string, from: string | RegExp, to: string): string {
  const found = typeof from === "string" ? text.includes(from) : from.test(text);
  if (!found) throw new Error(`deploy file no longer contains ${from}`);
  return typeof from === "string" ? text.split(from).join(to) : text.replace(from, to);
}

export function adaptNginxSite(site: string, o: { httpPort: number; httpsPort: number; backendPort: number; cert: string; key: string }): string {
  let text = site;
  text = swap(text, /^\s*listen \[::\]:80;\n/m, "");
  text = swap(text, /^\s*listen \[::\]:443 ssl http2;\n/m, "");
  text = swap(text, "listen 80;", `listen 127.0.0.1:${o.httpPort};`);
  text = swap(text, "listen 443 ssl http2;", `listen 127.0.0.1:${o.httpsPort} ssl http2;`);
  text = swap(text, "server 127.0.0.1:8080;", `server 127.0.0.1:${o.backendPort};`);
  text = swap(text, "/etc/letsencrypt/live/img.example.com/fullchain.pem", o.cert);
  text = swap(text, "/etc/letsencrypt/live/img.example.com/privkey.pem", o.key);
  return text;
}

export function adaptCaddyfile(caddyfile: string, o: { httpPort: number; httpsPort: number; backendPort: number; storage: string }): string {
  // Global options: no admin API, state in the temp dir, never touch the system trust store.
  const global = `{
	admin off
	storage file_system ${o.storage}
	skip_install_trust
	http_port ${o.httpPort}
	https_port ${o.httpsPort}
	local_certs
}
`;
  let text = swap(caddyfile, "img.example.com {", `https://127.0.0.1:${o.httpsPort} {\n\ttls internal`);
  text = swap(text, "reverse_proxy 127.0.0.1:8080", `reverse_proxy 127.0.0.1:${o.backendPort}`);
  return global + text;
}

async function run(cmd: string[]): Promise<void> {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) throw new Error(`${cmd.join(" ")} failed: ${err}`);
}

/** Waits until `origin` answers over TLS with `caFile` trusted. */
async function waitReady(origin: string, caFile: string, proc: ReturnType<typeof Bun.spawn>, what: string, logs: () => string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    // Read on every attempt: Caddy creates its root.crt before the bytes are in, and a CA read once
    // while the file was still empty failed every later handshake (seen on a loaded machine).
    const ca = readFileSync(caFile, "utf8");
    const ok = await fetch(`${origin}/healthz`, { tls: { ca } }).then(
      (r) => r.arrayBuffer().then(() => r.status === 200),
      () => false,
    );
    if (ok) return;
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`${what} did not become ready (exit ${proc.exitCode}):\n${logs()}`);
    await Bun.sleep(50);
  }
}

function pump(proc: ReturnType<typeof Bun.spawn>, sink: { text: string }) {
  const decoder = new TextDecoder();
  for (const stream of [proc.stdout, proc.stderr]) {
    void (async () => {
      for await (const chunk of stream as ReadableStream<Uint8Array>) sink.text += decoder.decode(chunk, { stream: true });
    })().catch(() => {});
  }
}

async function stop(proc: ReturnType<typeof Bun.spawn>, signal: NodeJS.Signals) {
  if (proc.exitCode === null) proc.kill(signal);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
  await proc.exited;
  clearTimeout(timer);
}

export async function startNginx(backendPort: number): Promise<RunningProxy> {
  const bin = which("nginx");
  if (!bin) throw new Error("nginx is not installed (apt-get install nginx; listed in .ci/setup)");
  const dir = mkdtempSync(join(tmpdir(), "kura-deploy-nginx-"));
  mkdirSync(join(dir, "tmp"));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  await run([
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=127.0.0.1",
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    key,
    "-out",
    cert,
  ]);
  const [httpPort, httpsPort] = freePorts(2) as [number, number];
  const site = adaptNginxSite(readFileSync(join(DEPLOY_DIR, "nginx.conf"), "utf8"), { httpPort, httpsPort, backendPort, cert, key });
  // As root, nginx workers would switch to `nobody`, which cannot read the 0700 temp dir.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  const main = `${user}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  include ${dir}/site.conf;
}
`;
  writeFileSync(join(dir, "site.conf"), site);
  writeFileSync(join(dir, "nginx.conf"), main);
  const sink = { text: "" };
  const proc = Bun.spawn([bin, "-e", join(dir, "error.log"), "-p", dir, "-c", join(dir, "nginx.conf")], { stdout: "pipe", stderr: "pipe" });
  pump(proc, sink);
  const logs = () => sink.text + (existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : "");
  const proxy: RunningProxy = {
    name: "nginx",
    origin: `https://127.0.0.1:${httpsPort}`,
    caFile: cert,
    logs,
    async dispose() {
      await stop(proc, "SIGQUIT");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitReady(proxy.origin, cert, proc, "nginx", logs);
  } catch (err) {
    await proxy.dispose();
    throw err;
  }
  return proxy;
}

export async function startCaddy(backendPort: number): Promise<RunningProxy> {
  const bin = which("caddy");
  if (!bin) throw new Error("caddy is not installed (apt-get install caddy; listed in .ci/setup)");
  const dir = mkdtempSync(join(tmpdir(), "kura-deploy-caddy-"));
  const storage = join(dir, "storage");
  const [httpPort, httpsPort] = freePorts(2) as [number, number];
  const config = adaptCaddyfile(readFileSync(join(DEPLOY_DIR, "Caddyfile"), "utf8"), { httpPort, httpsPort, backendPort, storage });
  writeFileSync(join(dir, "Caddyfile"), config);
  const sink = { text: "" };
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    XDG_DATA_HOME: join(dir, "data"),
    XDG_CONFIG_HOME: join(dir, "config"),
  };
  const proc = Bun.spawn([bin, "run", "--config", join(dir, "Caddyfile"), "--adapter", "caddyfile"], { env, stdout: "pipe", stderr: "pipe" });
  pump(proc, sink);
  const caFile = join(storage, "pki", "authorities", "local", "root.crt");
  const proxy: RunningProxy = {
    name: "caddy",
    origin: `https://127.0.0.1:${httpsPort}`,
    caFile,
    logs: () => sink.text,
    async dispose() {
      await stop(proc, "SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    // The internal CA's root appears once Caddy has issued its first certificate.
    const deadline = Date.now() + 60_000;
    while (!existsSync(caFile)) {
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`caddy did not create its internal CA (exit ${proc.exitCode}):\n${sink.text}`);
      await Bun.sleep(50);
    }
    await waitReady(proxy.origin, caFile, proc, "caddy", proxy.logs);
  } catch (err) {
    await proxy.dispose();
    throw err;
  }
  return proxy;
}
