import type { AppContext } from "../../context";
import { deleteChannel } from "../../channels/drain";
import { checkChannel, createChannel, exportChannel, requireChannel, testChannel, updateChannel } from "../../channels/service";
import { createBody, testBody, updateBody } from "../../channels/source";
import { templateItems } from "../../channels/templates";
import { channelConfigView, channelList } from "../../channels/views";
import { idParam, parseBody } from "../body";
import { badRequest, notFound } from "../errors";
import { sessionRoutes } from "../guard";

/** `purge` query value: absent means true (spec 4.7: deleting a channel purges its files unless purge=false). */
function parsePurge(value: string | undefined): boolean {
  if (value === undefined || value === "" || value === "true" || value === "1") return true;
  if (value === "false" || value === "0") return false;
  throw badRequest("参数 purge 必须是 true 或 false");
}

/** Storage channel administration (spec 4.7); administrators only. */
export function channelRoutes(app: AppContext) {
  return sessionRoutes(app, "admin")
    .get("/api/admin/channel-templates", () => {
      const items = templateItems();
      return { items, total: items.length };
    })
    .get("/api/admin/channels", () => {
      return channelList(app);
    })
    .post("/api/admin/channels", async ({ body, set, principal: p }) => {
      const created = await createChannel(app, p.user, parseBody(createBody, body));
      set.status = 201;
      return created;
    })
    .post("/api/admin/channels/test", async ({ body, set, principal: p }) => {
      set.headers["cache-control"] = "no-store";
      return testChannel(app, p.user, parseBody(testBody, body));
    })
    .get("/api/admin/channels/:id/config", ({ params, set }) => {
      const id = idParam(params.id);
      const row = id === undefined ? undefined : app.channels.repo.byId(id);
      if (!row) throw notFound("存储渠道不存在");
      set.headers["cache-control"] = "no-store";
      return channelConfigView(app, row);
    })
    .put("/api/admin/channels/:id", async ({ params, body, principal: p }) => {
      // The channel must exist before its new body is judged: 404 wins over 400.
      const row = requireChannel(app, idParam(params.id));
      return updateChannel(app, p.user, row, parseBody(updateBody, body));
    })
    .delete("/api/admin/channels/:id", ({ params, query, set, principal: p }) => {
      set.status = deleteChannel(app, p.user, idParam(params.id), parsePurge(query.purge));
    })
    .post("/api/admin/channels/:id/check", async ({ params }) => {
      return checkChannel(app, idParam(params.id));
    })
    .get("/api/admin/channels/:id/rclone-config", ({ params, principal: p }) => {
      const { fileName, text } = exportChannel(app, p.user, idParam(params.id));
      return new Response(text, {
        headers: {
          "content-type": "text/plain; charset=utf-8",
          "content-disposition": `attachment; filename="${fileName}"`,
          "cache-control": "no-store",
        },
      });
    });
}
