import { Elysia } from "elysia";
import openapiText from "../../../openapi.yaml" with { type: "text" };
import type { AppContext } from "../../context";
import { docsRoutes } from "./docs";
import { GzipAsset, textEtag } from "../gzip-asset";
import { forbidden } from "../errors";
import { requestInfo } from "../request-info";

// `no-cache` with an ETag: the docs page and API clients revalidate its 144 KB instead of downloading it each time.
const openapiAsset = new GzipAsset(() => new TextEncoder().encode(openapiText), textEtag(openapiText));

export function systemRoutes(app: AppContext) {
  return (
    new Elysia()
      .get("/healthz", () => new Response("ok", { headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" } }))
      .get("/metrics", async ({ request }) => {
        if (!app.bootstrap.metricsAllow.has(requestInfo(request).client)) throw forbidden("不允许从该地址访问监控指标");
        const body = await app.metrics.scrape();
        return new Response(body, { headers: { "content-type": app.metrics.registry.contentType, "cache-control": "no-store" } });
      })
      .get("/api/openapi.yaml", ({ request }) =>
        openapiAsset.respond(request, () => openapiText, { "content-type": "application/yaml; charset=utf-8", "cache-control": "no-cache" }),
      )
      // The docs page renders the same embedded document that /api/openapi.yaml serves;
      // no second, generated spec exists.
      .use(docsRoutes())
  );
}

export { openapiText };
