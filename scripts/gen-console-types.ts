// Generates src/console/app/api-types.ts from openapi.yaml's components/schemas, so the
// console's view of the JSON shapes comes from the same document the server is tested against.
//   bun run scripts/gen-console-types.ts          write the file
//   bun run scripts/gen-console-types.ts --check  exit 1 when the file is stale
// Covers the JSON Schema subset openapi.yaml uses: object/array/scalar types (also as
// [type, "null"] lists), enum, const, $ref, allOf, oneOf, additionalProperties.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

// biome-ignore lint/suspicious/noExplicitAny: a parsed OpenAPI schema node is arbitrary YAML
type Schema = Record<string, any>;

const ROOT = join(import.meta.dir, "..");
export const TYPES_FILE = join(ROOT, "src", "console", "app", "api-types.ts");

const SCALARS: Record<string, string> = { string: "string", integer: "number", number: "number", boolean: "boolean", null: "null" };

function indent(text: string, depth: number): string {
  return text.replace(/\n/g, `\n${"  ".repeat(depth)}`);
}

function key(name: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name);
}

function objectType(schema: Schema, depth: number): string {
  const props = Object.entries<Schema>(schema.properties ?? {});
  const required = new Set<string>(schema.required ?? []);
  const extra = schema.additionalProperties;
  if (!props.length) return extra && extra !== true ? `Record<string, ${tsType(extra, depth)}>` : "Record<string, unknown>";
  const lines = props.map(([name, s]) => {
    const doc = s.description ? `/** ${String(s.description).replace(/\s+/g, " ").replace(/\*\//g, "* /")} */\n` : "";
    return `${doc}${key(name)}${required.has(name) ? "" : "?"}: ${tsType(s, depth + 1)};`;
  });
  return `{\n  ${indent(lines.join("\n"), 1)}\n}`;
}

export function tsType(schema: Schema, depth = 0): string {
  if (schema.$ref) return String(schema.$ref).split("/").pop()!;
  if (schema.allOf) {
    const parts = schema.allOf.map((s: Schema) => tsType(s, depth));
    // Own `properties` next to allOf extend the shape; without them, `required` narrows optional
    // members of the referenced shape.
    if (schema.properties) parts.push(objectType(schema, depth));
    else if (schema.required?.length) parts.push(`Required<Pick<${parts[0]}, ${schema.required.map((k: string) => JSON.stringify(k)).join(" | ")}>>`);
    return parts.join(" & ");
  }
  if (schema.oneOf || schema.anyOf) return (schema.oneOf ?? schema.anyOf).map((s: Schema) => tsType(s, depth)).join(" | ");
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v: unknown) => JSON.stringify(v)).join(" | ");
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (!types.length) return schema.properties ? objectType(schema, depth) : "unknown";
  return types
    .map((t) => {
      if (t === "object") return objectType(schema, depth);
      if (t === "array") {
        const item = schema.items ? tsType(schema.items, depth) : "unknown";
        return /[|&\s]/.test(item) && !item.startsWith("{") ? `(${item})[]` : `${item}[]`;
      }
      return SCALARS[t] ?? "unknown";
    })
    .join(" | ");
}

export function generate(openapiText: string): string {
  const doc = parse(openapiText);
  const out = [
    "// GENERATED from openapi.yaml by scripts/gen-console-types.ts — do not edit by hand.",
    "// Run `bun run scripts/gen-console-types.ts` after changing components/schemas.",
    "",
  ];
  for (const [name, schema] of Object.entries<Schema>(doc.components.schemas)) {
    if (schema.description) out.push(`/** ${String(schema.description).replace(/\s+/g, " ").replace(/\*\//g, "* /")} */`);
    const body = tsType(schema);
    out.push(body.startsWith("{") && !schema.allOf ? `export interface ${name} ${body}` : `export type ${name} = ${body};`, "");
  }
  return out.join("\n");
}

if (import.meta.main) {
  const text = generate(readFileSync(join(ROOT, "openapi.yaml"), "utf8"));
  if (process.argv.includes("--check")) {
    const current = readFileSync(TYPES_FILE, "utf8");
    if (current !== text) {
      console.error("src/console/app/api-types.ts 与 openapi.yaml 不一致，请运行 bun run scripts/gen-console-types.ts");
      process.exit(1);
    }
  } else {
    writeFileSync(TYPES_FILE, text);
    console.log(`已生成 ${TYPES_FILE}`);
  }
}
