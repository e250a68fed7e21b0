import type { AppContext } from "../../context";
import { deleteChannel, parsePurge } from "../../channels/drain";
import { checkChannel, createChannel, exportChannel, testChannel, updateChannel } from "../../channels/service";
import { templateItems } from "../../channels/templates";
import { channelConfigView, channelList } from "../../channels/views";
import { idParam } from "../body";
import { notFound } from "../errors";
import { sessionRoutes } from "../guard";

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
      const created = await createChannel(app, p.user, body);
      set.status = 201;
      return created;
    })
    .post("/api/admin/channels/test", async ({ body, set }) => {
      set.headers["cache-control"] = "no-store";
      return testChannel(app, body);
    })
    .get("/api/admin/channels/:id/config", ({ params, set }) => {
      const id = idParam(params.id);
      const row = id === undefined ? undefined : app.channels.repo.byId(id);
      if (!row) throw notFound("存储渠道不存在");
      set.headers["cache-control"] = "no-store";
      return channelConfigView(app, row);
    })
    .put("/api/admin/channels/:id", async ({ params, body, principal: p }) => {
      return updateChannel(app, p.user, idParam(params.id), body);
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
