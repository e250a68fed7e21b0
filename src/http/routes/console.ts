import { createHash } from "node:crypto";
import { Elysia } from "elysia";
import consoleBundle from "../../console/index.html" with { type: "text" };
// Runs at bundle time (see src/console/bundle.ts): the finished browser script becomes a
// string literal here, so the compiled executable needs no console source files.
import { consoleScript } from "../../console/bundle" with { type: "macro" };
import { GzipAsset, textEtag } from "../gzip-asset";

// A text import yields the file's contents; Bun's types describe the HTML-bundle form.
const template = consoleBundle as unknown as string;
const SCRIPT_MARKER = "/*KURA_CONSOLE_SCRIPT*/";

function sha256(text: string): string {
  return `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;
}

/** The page: template with the script inlined (a function replacer, so `$&` in code stays literal). */
export function buildConsolePage(script: string): { html: string; csp: string } {
  if (!template.includes(SCRIPT_MARKER)) throw new Error("控制台模板缺少脚本占位符");
  const html = template.replace(SCRIPT_MARKER, () => script);
  const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => sha256(m[1]!));
  // Inline code is allowed by hash only: no 'unsafe-inline', no external origin.
  const csp = [
    "default-src 'none'",
    `script-src ${sha256(script)}`,
    `style-src ${styles.join(" ")}`,
    "img-src 'self' data: blob:",
    "connect-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return { html, csp };
}

const page = buildConsolePage(consoleScript());

/**
 * `no-cache` makes the browser ask every time; without a validator every open downloaded the whole
 * ~100 KB page again (audit 15 LOW-7). The page is fixed per build, so its hash is the ETag.
 */
const asset = new GzipAsset(() => new TextEncoder().encode(page.html), textEtag(page.html));

const headers = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-cache",
  "content-security-policy": page.csp,
  // frame-ancestors 'none' for browsers and webviews older than CSP level 2 (clickjacking of the admin console).
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
};

export function consoleRoutes() {
  return new Elysia().get("/", ({ request }) => asset.respond(request, () => page.html, headers));
}
