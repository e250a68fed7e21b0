import { Elysia } from "elysia";
import { z } from "zod";
import type { AppContext } from "../../context";
import { dismiss, LISTABLE_DEDUP as LISTABLE, merge, type ReviewOutcome } from "../../images/dedup";
import { idParam, pagination, parseBody } from "../body";
import { badRequest, conflict, notFound } from "../errors";
import { authenticate } from "../guard";

const mergeBody = z.strictObject({ keep_blob_id: z.number().int().min(1) });


interface SideRow {
  blob_id: number;
  image_id: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  refs: number;
}

function throwFor(outcome: ReviewOutcome) {
  if (outcome === "not_found") throw notFound("相似候选不存在");
  if (outcome === "not_pending") throw conflict("该相似候选已处理");
  if (outcome === "not_in_pair") throw badRequest("keep_blob_id 必须是该候选中的一方");
  if (outcome === "blob_gone") throw conflict("候选中的图片已被删除，无法合并");
}

/** Admin review (spec 4.9): similar pairs from the dedup scan, and cold images awaiting a decision. */
export function reviewRoutes(app: AppContext) {
  const side = (blobId: number): SideRow =>
    app.db
      .query<SideRow, [number]>(
        `SELECT b.id AS blob_id, (SELECT id FROM images WHERE blob_id = b.id ORDER BY created_at, rowid LIMIT 1) AS image_id,
                b.mime, b.size, b.width, b.height, b.ref_count AS refs
         FROM blobs b WHERE b.id = ?`,
      )
      .get(blobId)!;

  return new Elysia()
    .get("/api/admin/dedup", ({ request, query }) => {
      authenticate(app, request, { admin: true });
      const { pageSize, offset } = pagination(query);
      const total = app.db.query<{ n: number }, []>(`SELECT COUNT(*) AS n ${LISTABLE}`).get()!.n;
      // Closest pairs first: those are the likeliest true duplicates.
      const rows = app.db
        .query<{ id: number; distance: number; created_at: string; blob_a: number; blob_b: number }, [number, number]>(
          `SELECT c.id, c.distance, c.created_at, c.blob_a, c.blob_b ${LISTABLE} ORDER BY c.distance, c.id LIMIT ? OFFSET ?`,
        )
        .all(pageSize, offset);
      const items = rows.map((r) => ({ id: r.id, distance: r.distance, created_at: r.created_at, a: side(r.blob_a), b: side(r.blob_b) }));
      return { items, total };
    })
    .post("/api/admin/dedup/:id/merge", ({ request, params, body, set }) => {
      const p = authenticate(app, request, { admin: true });
      const id = idParam(params.id);
      if (id === undefined) throw notFound("相似候选不存在");
      const { keep_blob_id } = parseBody(mergeBody, body);
      throwFor(merge(app, id, keep_blob_id, p.user));
      set.status = 204;
    })
    .post("/api/admin/dedup/:id/dismiss", ({ request, params, set }) => {
      const p = authenticate(app, request, { admin: true });
      const id = idParam(params.id);
      if (id === undefined) throw notFound("相似候选不存在");
      throwFor(dismiss(app, id, p.user));
      set.status = 204;
    })
    .get("/api/admin/cleanup", ({ request, query }) => {
      authenticate(app, request, { admin: true });
      const { pageSize, offset } = pagination(query);
      const where = "WHERE i.pending_cleanup = 1 AND i.cleanup_exempt = 0";
      const total = app.db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM images i ${where}`).get()!.n;
      // Longest-unused first: never-accessed images count from their upload time. Superseded images
      // (an object_key re-pointed to a later upload) are listed with reason "superseded".
      const items = app.db
        .query<Record<string, unknown>, [number, number]>(
          `SELECT i.id, '/i/' || i.id AS url, i.user_id, i.file_name, b.mime, b.size, b.width, b.height,
                  i.last_public_access_at AS last_access_at, i.created_at, COALESCE(i.cleanup_reason, 'cold') AS reason
           FROM images i JOIN blobs b ON b.id = i.blob_id ${where}
           ORDER BY COALESCE(i.last_public_access_at, i.created_at), i.rowid LIMIT ? OFFSET ?`,
        )
        .all(pageSize, offset);
      return { items, total };
    });
}
