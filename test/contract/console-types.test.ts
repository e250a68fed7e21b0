// The console's API types are generated from openapi.yaml; a stale copy would let the console
// drift from the contract the server is tested against.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generate, TYPES_FILE } from "../../scripts/gen-console-types";

test("src/console/app/api-types.ts matches openapi.yaml (run scripts/gen-console-types.ts)", () => {
  const spec = readFileSync(join(import.meta.dir, "..", "..", "openapi.yaml"), "utf8");
  expect(readFileSync(TYPES_FILE, "utf8")).toBe(generate(spec));
  // A schema field really comes through: the dashboard's per-user rows.
  expect(generate(spec)).toContain("per_user: {");
});
