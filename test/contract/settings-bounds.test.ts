/**
 * The bounds openapi.yaml gives each runtime setting are the ones the server enforces (the zod
 * schema in src/config/settings-schema.ts): a client validating against the spec, or a person
 * reading it, learns the real limits. Before, eleven settings had no maximum in the spec and three
 * strings no length limit, although the server refused values past them.
 */
import { expect, test } from "bun:test";
import { z } from "zod";
import { settingsPatchSchema } from "../../src/config/settings-schema";
import { spec } from "../helpers/openapi";

type JsonSchema = Record<string, unknown> & { anyOf?: JsonSchema[]; items?: JsonSchema; type?: unknown };

const BOUNDS = ["minimum", "maximum", "maxLength", "maxItems", "enum"] as const;

/** The schema without its `null` alternative (zod writes anyOf, the spec a type list). */
function nonNull(schema: JsonSchema): JsonSchema {
  return schema.anyOf?.find((s) => s.type !== "null") ?? schema;
}

/** The bounds of a schema and of its items, as comparable data. */
function boundsOf(schema: JsonSchema): Record<string, unknown> {
  const s = nonNull(schema);
  const out: Record<string, unknown> = {};
  for (const k of BOUNDS) if (s[k] !== undefined) out[k] = s[k];
  if (s.items) out.items = boundsOf(s.items);
  return out;
}

test("every setting's minimum, maximum, length, item count and values in openapi.yaml are the server's", () => {
  const server = z.toJSONSchema(settingsPatchSchema, { unrepresentable: "any" }).properties as Record<string, JsonSchema>;
  const documented = spec.components.schemas.Settings.properties as Record<string, JsonSchema>;
  expect(Object.keys(documented).sort()).toEqual(Object.keys(server).sort());
  for (const key of Object.keys(server)) {
    expect([key, boundsOf(documented[key]!)]).toEqual([key, boundsOf(server[key]!)]);
  }
});
