// /api/docs: Scalar's API reference rendering the embedded openapi.yaml, served entirely
// from Kura's own origin. The renderer's standalone build is imported as a file, so
// `bun build --compile` embeds it in the executable (from source it is read from node_modules).
import { Elysia } from "elysia";
import { BUILD } from "../../version";
import { escapeMarkup } from "../../shared/markup";
import { GzipAsset } from "../gzip-asset";
// The package's `exports` map does not list the browser build, so it is addressed by path.
import scalarScriptPath from "../../../node_modules/@scalar/api-reference/dist/browser/standalone.js" with { type: "file" };

export const DOCS_SCRIPT_PATH = "/api/docs/standalone.js";

/**
 * No third-party origin: fonts off (they would come from fonts.scalar.com), telemetry off,
 * no "open in client" button (links to scalar.com), no request proxy.
 */
const configuration = {
  url: "/api/openapi.yaml",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  documentDownloadType: "yaml",
  defaultOpenAllTags: false,
};

const page = `<!doctype html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kura API 文档（${escapeMarkup(BUILD.version)}）</title>
<link rel="icon" href="data:,">
</head>
<body>
<noscript>API 文档需要启用 JavaScript；原始文档见 <a href="/api/openapi.yaml">/api/openapi.yaml</a>。</noscript>
<script id="api-reference" data-url="/api/openapi.yaml" data-configuration="${escapeMarkup(JSON.stringify(configuration))}"></script>
<script src="${DOCS_SCRIPT_PATH}"></script>
</body>
</html>
`;

/**
 * Scripts only from this origin and no inline script at all. The renderer (Vue + Tailwind)
 * injects <style> elements and style attributes at runtime, so styles alone allow
 * 'unsafe-inline' — on this page only; the console keeps its hash-only policy.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

export function docsRoutes() {
  const script = Bun.file(scalarScriptPath);
  // Revalidatable after its hour, not downloaded again (4.3 MB, 1.2 MB gzipped): the script is the one
  // this build embeds, so the build and its size name it without hashing 4 MB at start.
  const scriptAsset = new GzipAsset(() => script.bytes(), `"docs-${Bun.hash(`${BUILD.version}\0${BUILD.commit}\0${script.size}`).toString(36)}"`);
  return new Elysia()
    .get(
      "/api/docs",
      () =>
        new Response(page, {
          headers: {
            "content-type": "text/html; charset=utf-8",
            "cache-control": "no-cache",
            "content-security-policy": DOCS_CSP,
            "referrer-policy": "no-referrer",
          },
        }),
    )
    .get(DOCS_SCRIPT_PATH, ({ request }) =>
      scriptAsset.respond(request, () => script, {
        "content-type": "text/javascript; charset=utf-8",
        "cache-control": "public, max-age=3600",
        "x-content-type-options": "nosniff",
      }),
    );
}
