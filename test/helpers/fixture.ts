/**
 * The server-per-describe boilerplate as one call. In a file or a `describe`:
 *
 *   const { server, admin } = useAdmin();          // KuraServer.start() + adminSession() in beforeAll
 *   const { server } = useServer({ env: { … } });  // KuraServer.start(opts) only
 *   const { server } = useServer(() => ({ env: { KURA_CDN_API_BASE: cdn.base } }));  // opts read in beforeAll
 *
 * registers a beforeAll that starts the server (and logs the built-in admin in, replacing the factory
 * password) and an afterAll that disposes of it. Hooks run in the order they are registered, so a
 * beforeAll written below the call can already use `server` and `admin`.
 *
 * `server` and `admin` are stand-ins, usable before the hook has run: every property read goes to
 * the instance beforeAll created. That keeps test bodies exactly as they were with
 * `let server: KuraServer` (the move onto this helper changed no assertion). Read them only inside
 * hooks and tests; before beforeAll (or after a failed start) a read throws and says so.
 */
import { afterAll, beforeAll } from "bun:test";
import { adminSession, Session } from "./client";
import { KuraServer, type StartOptions } from "./server";

export interface ServerFixture {
  readonly server: KuraServer;
}

export interface AdminFixture extends ServerFixture {
  readonly admin: Session;
}

/** A stand-in for an object that exists only once `read` returns it; methods run on the real one. */
function late<T extends object>(prototype: object, what: string, read: () => T | undefined): T {
  const real = (): T => {
    const value = read();
    if (!value) throw new Error(`${what} is created in beforeAll: read it inside hooks and tests only`);
    return value;
  };
  return new Proxy(Object.create(prototype) as T, {
    get(_, key) {
      const target = real();
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
    set: (_, key, value) => Reflect.set(real(), key, value),
    has: (_, key) => key in real(),
  });
}

/** Start options, or a function that makes them when beforeAll runs (after the hooks registered before it). */
export type FixtureOptions<T> = T | (() => T);

const resolved = <T>(opts: FixtureOptions<T>): T => (typeof opts === "function" ? (opts as () => T)() : opts);

/** A KuraServer for the enclosing describe (or file): started in beforeAll, disposed in afterAll. */
export function useServer(opts: FixtureOptions<StartOptions> = {}): ServerFixture {
  let server: KuraServer | undefined;
  beforeAll(async () => {
    server = await KuraServer.start(resolved(opts));
  });
  afterAll(async () => {
    await server?.dispose();
  });
  return { server: late(KuraServer.prototype, "useServer().server", () => server) };
}

/** useServer() plus the built-in admin logged in with `password` instead of the factory default. */
export function useAdmin(opts: FixtureOptions<StartOptions & { password?: string }> = {}): AdminFixture {
  let password: string | undefined;
  const { server } = useServer(() => {
    const { password: chosen, ...start } = resolved(opts);
    password = chosen;
    return start;
  });
  let admin: Session | undefined;
  beforeAll(async () => {
    admin = await adminSession(server, password);
  });
  return { server, admin: late(Session.prototype, "useAdmin().admin", () => admin) };
}
