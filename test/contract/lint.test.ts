import { expect, test } from "bun:test";
import { lint } from "../../scripts/lint";

// The project's lint (rules in scripts/lint.ts) runs with the suite, so CI enforces it.
test("src passes scripts/lint.ts (fix the import style with `bun scripts/lint.ts --fix`)", () => {
  expect(lint().map((f) => `${f.file}:${f.line} [${f.rule}] ${f.message}`)).toEqual([]);
});
