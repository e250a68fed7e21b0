import { describe, expect, test } from "bun:test";
import { cycles, importGraph } from "./import-graph";

/** The domain core: it may be used by every surface but must not know any of them. */
const DOMAIN = ["images", "channels", "delivery", "ops", "jobs", "auth", "config", "users", "db", "net", "native", "datadir"];
const SURFACES = ["http", "s3"];

const top = (file: string) => file.split("/")[0]!;

describe("the import graph of src/", () => {
  const graph = importGraph();

  test("is read from the source (sanity: it sees the known edges)", () => {
    expect(graph.size).toBeGreaterThan(150);
    expect(graph.get("http/app.ts")).toContain("http/routes/images.ts");
    expect(graph.get("app-context.ts")).toContain("delivery/variants.ts");
  });

  test("has no cycle (type-only imports included)", () => {
    expect(cycles(graph)).toEqual([]);
  });

  test("domain folders never import the HTTP or S3 surface", () => {
    const leaks: string[] = [];
    for (const [file, targets] of graph) {
      if (!DOMAIN.includes(top(file))) continue;
      for (const target of targets) if (SURFACES.includes(top(target))) leaks.push(`${file} → ${target}`);
    }
    expect(leaks).toEqual([]);
  });
});
