import { expect } from "bun:test";

/** Chinese characters: a user-facing message has at least one. */
export const CJK = /[\u4e00-\u9fff]/;

/**
 * Wording of the libraries and runtimes under Kura, never meant for users: zod's and Elysia's
 * defaults, SQLite, sharp/libvips, node:crypto, Bun's fetch and listen errors, Node's file-system
 * errors, JavaScript exceptions and stack frames.
 */
export const INTERNAL_WORDING = new RegExp(
  [
    String.raw`Expected (?:string|number|boolean|object|array)`,
    "Invalid (?:input|type|enum|url)",
    "Required",
    "Unrecognized key",
    "NOT_FOUND",
    "VALIDATION",
    "\\bPARSE\\b",
    "SQLITE_",
    "database is locked",
    "Input buffer",
    "[Vv]ips",
    "\\bsharp\\b",
    "Unsupported state",
    "authentication tag",
    "Failed to (?:listen|fetch|start)",
    "getaddrinfo",
    "ERR_[A-Z_]+",
    "[A-Z]{4,}: [a-z]",
    "TypeError",
    "SyntaxError",
    "RangeError",
    "JSON Parse",
    "Unexpected (?:token|end|identifier)",
    "is not (?:a function|an object|defined)",
    "Cannot read",
    "undefined",
    "\\bat \\S+:\\d+:\\d+",
    "node_modules",
    "\\.ts:\\d+",
  ].join("|"),
);

/** Three English words in a row: a sentence, where Kura's messages only name technical terms. */
export const ENGLISH_PROSE = /\b[A-Za-z]{3,} [a-z]{2,} [a-z]{2,}\b/;

/** A message a user or operator reads: Chinese, without the libraries' wording or English prose. */
export function expectUserMessage(text: string): void {
  expect({ text, chinese: CJK.test(text) }).toEqual({ text, chinese: true });
  expect(text).not.toMatch(INTERNAL_WORDING);
  expect(text).not.toMatch(ENGLISH_PROSE);
}
