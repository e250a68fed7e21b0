/**
 * Kura's lint: a few rules no compiler checks, over src/. Run by the test suite
 * (test/contract/lint.test.ts) and so in CI; `bun scripts/lint.ts` prints findings,
 * `bun scripts/lint.ts --fix` rewrites what can be fixed mechanically (the import style).
 *
 * Rules:
 *  - import-style: relative imports name the module without the `.ts` extension.
 *  - whitespace: no tabs, no trailing whitespace.
 *  - file-size: src files stay under 400 lines (one job per module); generated files excepted.
 *  - no-console: src logs through the logger (ops/log.ts), except CLI output.
 *  - chinese-errors: a domain or API error built from a string literal says it in Chinese.
 *  - write-transactions: transactions go through inWriteTransaction (src/db/write-transaction.ts,
 *    BEGIN IMMEDIATE): bun:sqlite's default deferred BEGIN fails at once, without waiting, when it
 *    reads before writing while another process holds the lock.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const MAX_LINES = 400;
/** Files allowed over MAX_LINES, with the reason. */
const LONG_FILES: Record<string, string> = {
  "src/console/app/api-types.ts": "generated from openapi.yaml",
};
/** Where console output is the product (CLI commands, version), not logging. */
const CONSOLE_ALLOWED = [/^src\/main\.ts$/, /^src\/cli\//, /^src\/console\/app\//, /^src\/reset-password\.ts$/, /^src\/selftest\.ts$/];

export interface Finding {
  file: string;
  line: number;
  rule: string;
  message: string;
}

const RELATIVE_TS_IMPORT = /(\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)(["'])(\.{1,2}\/[^"']+?)\.ts\2/gm;
/** `new Invalid("…")`, `new ApiError(400, "…")`, `new S3Error("Code", "…")`: the message literal is group 3. */
const ERROR_LITERAL =
  /\bnew\s+(?:(?:Invalid|NotFound|Conflict|Forbidden|Unauthenticated|QuotaExceeded|TooMany|Unavailable)\(\s*|ApiError\(\s*\d+\s*,\s*|S3Error\(\s*"[A-Za-z]+"\s*,\s*)(["'`])((?:(?!\1)[^\\]|\\.)*)\1/g;
const CJK = /[\u4e00-\u9fff]/;

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

const lineOf = (text: string, index: number) => text.slice(0, index).split("\n").length;

export function lint(opts: { fix?: boolean } = {}): Finding[] {
  const findings: Finding[] = [];
  for (const path of files(join(ROOT, "src"))) {
    const file = relative(ROOT, path);
    let text = readFileSync(path, "utf8");
    if (opts.fix) {
      const fixed = text.replace(RELATIVE_TS_IMPORT, (_m, head: string, quote: string, spec: string) => `${head}${quote}${spec}${quote}`);
      if (fixed !== text) {
        text = fixed;
        writeFileSync(path, text);
      }
    }
    for (const m of text.matchAll(RELATIVE_TS_IMPORT)) {
      findings.push({ file, line: lineOf(text, m.index!), rule: "import-style", message: `导入路径不应带 .ts 扩展名: ${m[3]}.ts` });
    }
    text.split("\n").forEach((line, i) => {
      if (line.includes("\t")) findings.push({ file, line: i + 1, rule: "whitespace", message: "使用了制表符" });
      if (/\s+$/.test(line)) findings.push({ file, line: i + 1, rule: "whitespace", message: "行尾有多余空白" });
    });
    const lines = text.split("\n").length;
    if (lines > MAX_LINES && !LONG_FILES[file]) findings.push({ file, line: lines, rule: "file-size", message: `文件超过 ${MAX_LINES} 行，请拆分` });
    if (!CONSOLE_ALLOWED.some((re) => re.test(file))) {
      for (const m of text.matchAll(/\bconsole\.(log|info|warn|error)\(/g)) {
        findings.push({ file, line: lineOf(text, m.index!), rule: "no-console", message: "请通过日志器 (ops/log.ts) 输出" });
      }
    }
    if (file !== "src/db/write-transaction.ts") {
      for (const m of text.matchAll(/\.transaction\(/g)) {
        findings.push({ file, line: lineOf(text, m.index!), rule: "write-transactions", message: "事务请使用 inWriteTransaction（BEGIN IMMEDIATE）" });
      }
    }
    for (const m of text.matchAll(ERROR_LITERAL)) {
      if (!CJK.test(m[2]!)) findings.push({ file, line: lineOf(text, m.index!), rule: "chinese-errors", message: `错误信息应使用中文: ${m[2]!.slice(0, 60)}` });
    }
  }
  return findings;
}

if (import.meta.main) {
  const findings = lint({ fix: process.argv.includes("--fix") });
  for (const f of findings) console.log(`${f.file}:${f.line} [${f.rule}] ${f.message}`);
  process.exit(findings.length ? 1 : 0);
}
