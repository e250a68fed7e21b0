import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { MIGRATIONS } from "../../src/db/migrations";
import { createRouter } from "../../src/http/app";
import { spec } from "../helpers/openapi";

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"];

/** Elysia's "/i/:id" → "/i/{id}"; the object-key wildcard is documented as {user_id}/{object_key}, the S3 one as {path}. */
export function toSpecPath(path: string): string {
  if (path === "/o/*") return "/o/{user_id}/{object_key}";
  if (path === "/s3/*") return "/s3/{path}";
  return path.replace(/:([A-Za-z_]+)/g, "{$1}");
}

describe("openapi.yaml is the single source of truth", () => {
  // Handlers are never called here; the router is built only to list its routes.
  const router = createRouter({} as AppContext);
  const routed = new Set(router.routes.map((r) => `${r.method.toUpperCase()} ${toSpecPath(r.path)}`));
  // The router answers HEAD through the GET handler of the same path.
  for (const r of [...routed]) if (r.startsWith("GET ")) routed.add(r.replace(/^GET /, "HEAD "));
  const documented = new Set<string>();
  for (const [path, item] of Object.entries<Record<string, unknown>>(spec.paths)) {
    for (const m of METHODS) if (item[m]) documented.add(`${m.toUpperCase()} ${path}`);
  }

  test("every routed endpoint is documented", () => {
    expect([...routed].filter((r) => !r.startsWith("HEAD ") && !documented.has(r))).toEqual([]);
  });

  test("every documented endpoint is routed", () => {
    expect([...documented].filter((d) => !routed.has(d))).toEqual([]);
  });

  test("every operation has a Chinese summary and documented responses", () => {
    for (const [path, item] of Object.entries<Record<string, any>>(spec.paths)) {
      for (const m of METHODS) {
        const op = item[m];
        if (!op) continue;
        expect(`${m} ${path}: ${op.summary}`).toMatch(/[\u4e00-\u9fff]/);
        expect(Object.keys(op.responses ?? {}).length).toBeGreaterThan(0);
      }
    }
  });

  test("the document is OpenAPI 3.1", () => {
    expect(spec.openapi).toMatch(/^3\.1\./);
  });
});

test("every migration file is embedded, in order", () => {
  const files = readdirSync(join(import.meta.dir, "../../migrations"))
    .filter((f) => f.endsWith(".sql"))
    .sort();
  expect(MIGRATIONS.map((m) => m.name)).toEqual(files);
  for (const [i, m] of MIGRATIONS.entries()) expect(m.version).toBe(i + 1);
  for (const [i, f] of files.entries()) expect(f.startsWith(`${String(i + 1).padStart(4, "0")}_`)).toBe(true);
});
