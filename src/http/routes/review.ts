import { z } from "zod";
import type { AppContext } from "../../context";
import { dismiss, merge } from "../../images/dedup";
import { listCleanup, listDedupPairs } from "../../images/repos/review";
import { idParam, pagination, parseBody } from "../body";
import { notFound } from "../errors";
import { sessionRoutes } from "../guard";

const mergeBody = z.strictObject({ keep_blob_id: z.number().int().min(1) });

/** Admin review (spec 4.9): similar pairs from the dedup scan, and cold images awaiting a decision. */
export function reviewRoutes(app: AppContext) {
  return sessionRoutes(app, "admin")
    .get("/api/admin/dedup", ({ query }) => {
      const { pageSize, offset } = pagination(query);
      return listDedupPairs(app.db, { limit: pageSize, offset, cursor: query.cursor || undefined });
    })
    .post("/api/admin/dedup/:id/merge", ({ params, body, set, principal: p }) => {
      const id = idParam(params.id);
      if (id === undefined) throw notFound("相似候选不存在");
      const { keep_blob_id } = parseBody(mergeBody, body);
      merge(app, id, keep_blob_id, p.user);
      set.status = 204;
    })
    .post("/api/admin/dedup/:id/dismiss", ({ params, set, principal: p }) => {
      const id = idParam(params.id);
      if (id === undefined) throw notFound("相似候选不存在");
      dismiss(app, id, p.user);
      set.status = 204;
    })
    .get("/api/admin/cleanup", ({ query }) => {
      const { pageSize, offset } = pagination(query);
      return listCleanup(app.db, { limit: pageSize, offset, cursor: query.cursor || undefined });
    });
}
