// The console's settings page (src/console/app/settings-fields.ts) must render every runtime key of
// src/config/settings-schema.ts, and state each integer's range exactly as the server checks it:
// a key added to the schema without a field would be reachable only by API (audit 9, LOW-5), and a
// range shown wrong would send people to a value the server rejects (LOW-6).
import { expect, test } from "bun:test";
import { z } from "zod";
import { SETTING_GROUPS } from "../../src/console/app/settings-fields";
import { DEFAULT_SETTINGS, settingsPatchSchema } from "../../src/config/settings-schema";

const fields = SETTING_GROUPS.flatMap((g) => g.fields);

test("every runtime setting has exactly one field on the console's settings page", () => {
  const keys: string[] = fields.map((f) => f.key);
  expect(new Set(keys).size).toBe(keys.length);
  expect([...keys].sort()).toEqual(Object.keys(DEFAULT_SETTINGS).sort());
});

test("each integer field's range is the server's", () => {
  for (const f of fields) {
    const schema = (settingsPatchSchema.shape as Record<string, z.ZodOptional<z.ZodType>>)[f.key]!.unwrap();
    if (!(schema instanceof z.ZodNumber)) {
      expect({ key: f.key, kind: f.kind }).not.toEqual({ key: f.key, kind: "int" });
      continue;
    }
    expect({ key: f.key, kind: f.kind, min: f.min, max: f.max }).toEqual({ key: f.key, kind: "int", min: schema.minValue!, max: schema.maxValue! });
  }
});
