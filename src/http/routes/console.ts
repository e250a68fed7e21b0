import { Elysia } from "elysia";
import consoleHtml from "../../console/index.html" with { type: "text" };

const headers = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-cache",
  "content-security-policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:",
};

export function consoleRoutes() {
  return new Elysia().get("/", () => new Response(consoleHtml, { headers }));
}
