import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

export const spec = parse(readFileSync(join(import.meta.dir, "../../openapi.yaml"), "utf8"));

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...spec, $id: "openapi" });

const escapePointer = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

/** The spec path template that a concrete request path matches ("/api/admin/users/u1" → "/api/admin/users/{id}"). */
export function specPathFor(path: string): string | undefined {
  const candidates = Object.keys(spec.paths).filter((template) => {
    const re = new RegExp(
      `^${template
        .replace(/[.*+?^$()|[\]\\]/g, "\\$&")
        .replace(/\{object_key\}/, ".+")
        .replace(/\{[^}]+\}/g, "[^/]+")}$`,
    );
    return re.test(path);
  });
  // Prefer the most literal template, like the router does.
  return candidates.sort((a, b) => a.split("{").length - b.split("{").length)[0];
}

const cache = new Map<string, ReturnType<typeof ajv.compile> | null>();

/** Throws when a JSON response does not match the documented schema for its path, method and status. */
export function assertMatchesSpec(method: string, path: string, status: number, body: unknown) {
  const template = specPathFor(path.split("?")[0]!);
  if (!template) throw new Error(`path ${path} is not in openapi.yaml`);
  const op = spec.paths[template][method.toLowerCase()];
  if (!op) throw new Error(`${method} ${template} is not in openapi.yaml`);
  let response = op.responses[String(status)];
  if (!response) throw new Error(`${method} ${template} does not document status ${status}`);
  let pointer = `openapi#/paths/${escapePointer(template)}/${method.toLowerCase()}/responses/${status}`;
  if (response.$ref) {
    pointer = `openapi${response.$ref}`;
    response = response.$ref
      .split("/")
      .slice(1)
      .reduce((o: any, k: string) => o[k], spec);
  }
  if (body === undefined) return;
  const media = response.content?.["application/json"];
  if (!media) throw new Error(`${method} ${template} ${status} documents no JSON body`);
  const key = `${pointer}`;
  let validate = cache.get(key);
  if (validate === undefined) {
    validate = ajv.compile({ $ref: `${pointer}/content/application~1json/schema` });
    cache.set(key, validate);
  }
  if (validate && !validate(body)) {
    throw new Error(`${method} ${path} ${status} does not match openapi.yaml: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`);
  }
}
