import { Elysia } from "elysia";
import consoleBundle from "../../console/index.html" with { type: "text" };

// A text import yields the file's contents; Bun's types describe the HTML-bundle form.
const consoleHtml = consoleBundle as unknown as string;

const headers = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-cache",
  "content-security-policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:",
};

export function consoleRoutes() {
  return new Elysia().get("/", () => new Response(consoleHtml, { headers }));
}
