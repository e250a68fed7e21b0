import { z } from "zod";
import type { AppContext } from "../../context";
import { deleteImagesInSlices } from "../../images/batch-delete";
import { setExemptInSlices } from "../../images/batch-exempt";
import { deleteReference } from "../../images/delete";
import { searchTermOf } from "../../images/repos/file-name-index";
import { searchImages } from "../../images/repos/image-search";
import { listImages } from "../../images/repos/list";
import type { ImageQuery } from "../../images/repos/image-filter";
import type { ImageView } from "../../images/repo";
import { asSeenBy, imageDetail, imageItem } from "../../images/views";
import { audit } from "../../ops/audit";
import { pagination, parseBody, timestampQuery } from "../body";
import { badRequest, forbidden, notFound } from "../errors";
import { sessionRoutes, type Principal } from "../guard";
import { inWriteTransaction } from "../../db/write-transaction";

const patchBody = z
  .strictObject({ ttl_hours: z.number().int().min(0).max(876_000).optional(), cleanup_exempt: z.boolean().optional() })
  .refine((b) => b.ttl_hours !== undefined || b.cleanup_exempt !== undefined, "至少需要一个字段");
const batchIds = z.array(z.string().max(64)).min(1).max(100);
const batchBody = z.strictObject({ ids: batchIds });
const batchExemptBody = z.strictObject({ ids: batchIds, exempt: z.boolean() });

const isAdmin = (p: Principal) => p.user.role === "admin";

export function imageRoutes(app: AppContext) {
  /** The image when the caller may see it: own, or any for an admin. */
  const visible = (p: Principal, id: string): ImageView | undefined => {
    const v = app.images.view(id);
    return v && (isAdmin(p) || v.user_id === p.user.id) ? asSeenBy(app, p.user, v) : undefined;
  };

  return sessionRoutes(app, "user")
    .get("/api/admin/images", async ({ query, principal: p }) => {
      const { pageSize, offset } = pagination(query);
      const filter: ImageQuery = {};
      if (!isAdmin(p)) {
        if (query.user_id && query.user_id !== p.user.id) throw forbidden("只有管理员可以查看其他用户的图片");
        filter.userId = p.user.id;
      } else if (query.user_id) filter.userId = query.user_id;
      const search = searchTermOf(query.search);
      if (search) filter.search = search;
      if (query.token_id !== undefined && query.token_id !== "") {
        if (!/^\d+$/.test(query.token_id)) throw badRequest("参数 token_id 必须是整数");
        filter.tokenId = Number(query.token_id);
      }
      filter.since = timestampQuery(query.since, "since");
      filter.until = timestampQuery(query.until, "until");
      if (query.exempt !== undefined && query.exempt !== "") {
        if (query.exempt !== "1") throw badRequest("参数 exempt 只能是 1");
        filter.exempt = true;
      }
      const cursor = query.cursor === undefined || query.cursor === "" ? undefined : query.cursor;
      // A search runs in steps with turns of the loop between (image-search.ts); the plain list is one indexed statement.
      const page = filter.search ? await searchImages(app.db, filter, { pageSize, offset, cursor }) : listImages(app.db, filter, { pageSize, offset, cursor });
      return { items: page.rows.map((v) => imageItem(asSeenBy(app, p.user, v))), total: page.total, next_cursor: page.nextCursor };
    })
    .post("/api/admin/images/batch-delete", ({ body, principal: p }) => {
      const { ids } = parseBody(batchBody, body);
      return deleteImagesInSlices(
        app,
        ids,
        (id) => visible(p, id) !== undefined,
        (id) => audit(app.db, p.user, "image.delete", id),
      );
    })
    .post("/api/admin/images/batch-exempt", ({ body, principal: p }) => {
      if (!isAdmin(p)) throw forbidden("只有管理员可以设置清理豁免");
      const { ids, exempt } = parseBody(batchExemptBody, body);
      return setExemptInSlices(app, ids, exempt, (id) => {
        app.lookups.forget(id);
        audit(app.db, p.user, "image.update", id, { cleanup_exempt: exempt });
      });
    })
    .get("/api/admin/images/:id", ({ params, principal: p }) => {
      const v = visible(p, params.id);
      if (!v) throw notFound("图片不存在");
      return imageDetail(app, v, p.user);
    })
    .patch("/api/admin/images/:id", ({ params, body, principal: p }) => {
      const v = visible(p, params.id);
      if (!v) throw notFound("图片不存在");
      const input = parseBody(patchBody, body);
      if (input.cleanup_exempt !== undefined && !isAdmin(p)) throw forbidden("只有管理员可以设置清理豁免");
      if (input.ttl_hours !== undefined && v.user_id !== p.user.id) throw forbidden("只有图片所有者可以修改有效期");
      inWriteTransaction(app.db, () => {
        if (input.ttl_hours !== undefined) app.images.setTtl(v.id, input.ttl_hours * 3600);
        if (input.cleanup_exempt !== undefined) app.images.setCleanupExempt(v.id, input.cleanup_exempt);
      });
      app.lookups.forget(v.id);
      audit(app.db, p.user, "image.update", v.id, input);
      return imageDetail(app, asSeenBy(app, p.user, app.images.view(v.id)!), p.user);
    })
    .delete("/api/admin/images/:id", ({ params, set, principal: p }) => {
      if (!visible(p, params.id) || !deleteReference(app, params.id)) throw notFound("图片不存在");
      audit(app.db, p.user, "image.delete", params.id);
      set.status = 204;
    });
}
