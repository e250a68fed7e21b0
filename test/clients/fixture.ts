/** A real Kura with an admin session and one upload token, for the client compatibility tests. */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { adminSession, type Session } from "../helpers/client";
import { assertMatchesSpec } from "../helpers/openapi";
import { KuraServer } from "../helpers/server";

export interface ClientFixture {
  server: KuraServer;
  admin: Session;
  token: string;
  dir: string;
  dispose(): Promise<void>;
}

export async function startClientFixture(env: Record<string, string> = {}): Promise<ClientFixture> {
  const server = await KuraServer.start({ env });
  const admin = await adminSession(server);
  const issued = await admin.json("POST", "/api/admin/tokens", { name: `clients-${Date.now()}` }, 201);
  const dir = mkdtempSync(join(tmpdir(), "kura-clients-"));
  return {
    server,
    admin,
    token: issued.token,
    dir,
    async dispose() {
      await server.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads a JSON answer and checks it against openapi.yaml for its path, method and status. */
export async function specJson<T = any>(res: Response, method: string, path: string): Promise<T> {
  const body = (await res.json()) as T;
  assertMatchesSpec(method, path, res.status, body);
  return body;
}

/**
 * A PicGo config directory as `picgo install <plugin>` leaves it: package.json naming the
 * plugin and node_modules holding it (linked to ours, no network), plus config.json.
 */
export function picgoHome(dir: string, plugin: string, config: unknown): string {
  const home = mkdtempSync(join(dir, "picgo-"));
  mkdirSync(join(home, "node_modules"));
  symlinkSync(resolve(import.meta.dir, "../../node_modules", plugin), join(home, "node_modules", plugin));
  writeFileSync(join(home, "package.json"), JSON.stringify({ name: "picgo-plugins", dependencies: { [plugin]: "*" } }));
  writeFileSync(join(home, "config.json"), JSON.stringify(config, null, 2));
  return join(home, "config.json");
}

export const sha256 = (bytes: Uint8Array | ArrayBuffer) =>
  new Bun.CryptoHasher("sha256").update(bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes).digest("hex");

/** A loopback origin answering every request with `png`, for uploads whose source is an image URL. */
export function pngOrigin(png: Uint8Array): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response(new Uint8Array(png), { headers: { "content-type": "image/png" } }),
  });
}
