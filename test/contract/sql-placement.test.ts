import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { SRC, sourceFiles } from "./import-graph";

/** Statement text as it appears in queries (not prose such as "delete from storage"). */
const SQL = /\b(SELECT\s+[\w*(]|INSERT\s+(?:OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s)/;

/** Where SQL may live: a module's repo.ts, a repos/ folder, or src/db (migrations, opening). */
const isRepository = (file: string) => file.endsWith("/repo.ts") || file.includes("/repos/") || file.startsWith("db/");

/**
 * Ratchet: files that still hold SQL outside a repository. The list may only shrink —
 * a file moved to a repository must be removed here (the test says so), and no new
 * file may start writing SQL of its own.
 */
const PENDING = new Set<string>([]);

function filesWithSql(): string[] {
  return sourceFiles()
    .filter((f) => SQL.test(readFileSync(f, "utf8")))
    .map((f) => relative(SRC, f))
    .sort();
}

describe("SQL lives in repositories", () => {
  const withSql = filesWithSql();

  test("sanity: the scan sees the repositories' SQL", () => {
    expect(withSql).toEqual(expect.arrayContaining(["images/repo.ts", "users/repo.ts", "jobs/repo.ts", "ops/repo.ts"]));
  });

  test("no file outside a repository holds SQL, except the pending ones", () => {
    expect(withSql.filter((f) => !isRepository(f) && !PENDING.has(f))).toEqual([]);
  });

  test("the pending list names only files that still hold SQL (remove a file once it is moved)", () => {
    expect([...PENDING].filter((f) => !withSql.includes(f))).toEqual([]);
  });

  test("route handlers hold no SQL at all", () => {
    expect(withSql.filter((f) => f.startsWith("http/"))).toEqual([]);
  });
});
