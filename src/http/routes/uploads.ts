import { Elysia } from "elysia";
import { rm } from "node:fs/promises";
import { z } from "zod";
import type { AppContext } from "../../context";
import { receiveMultipart } from "../../images/upload/receive";
import { runUpload, type UploadRequest } from "../../images/upload/service";
import { parseBody } from "../body";
import { badRequest } from "../errors";
import { sessionRoutes, uploadTokenRoutes } from "../guard";
import { publicOrigin } from "../request-info";
import { importFromUrl, uploadBodyLimits } from "../upload-input";

/** Object keys become /o/<user>/<key> aliases: relative, no dot segments, no control characters. */
const objectKey = z
  .string()
  .min(1)
  .max(1024)
  .refine(
    (k) => !k.startsWith("/") && !k.split("/").some((s) => s === "" || s === "." || s === "..") && !/[\u0000-\u001f\u007f\\]/.test(k),
    "无效的 object_key",
  );

function parseObjectKey(value: string | undefined): string | null {
  if (value === undefined) return null;
  const parsed = objectKey.safeParse(value);
  if (!parsed.success) throw badRequest("无效的 object_key");
  return parsed.data;
}

const urlImportBody = z.object({
  url: z.string().min(1).max(4096),
  file_name: z.string().min(1).max(255).optional(),
  exif_policy: z.string().optional(),
  ttl: z.union([z.number(), z.string()]).optional(),
});
const tokenUrlImportBody = urlImportBody.extend({ object_key: objectKey.optional() });

const FORM_FIELDS = ["exif_policy", "ttl"] as const;
const TOKEN_FORM_FIELDS = [...FORM_FIELDS, "object_key"] as const;

export function uploadRoutes(app: AppContext) {
  const respond = async (request: Request, req: UploadRequest) => {
    const result = await runUpload(app, app.uploadGate, req);
    return { id: result.id, url: `${publicOrigin(request, app.settings.get().base_url)}/i/${result.id}` };
  };

  const fileUpload = (request: Request, owner: { userId: string; tokenId: number | null }, fields: readonly string[]) =>
    respond(request, {
      ...owner,
      idempotencyKey: request.headers.get("idempotency-key"),
      receive: async () => {
        const { file, fields: form } = await receiveMultipart(request, app.paths.tmp, uploadBodyLimits(app), fields);
        try {
          return { file, options: { exifPolicy: form.exif_policy, ttl: form.ttl, objectKey: parseObjectKey(form.object_key) } };
        } catch (err) {
          // The pipeline owns the temp file only once receive() returned it.
          if (file.path) await rm(file.path, { force: true });
          throw err;
        }
      },
    });

  const urlUpload = (request: Request, owner: { userId: string; tokenId: number | null }, input: z.infer<typeof tokenUrlImportBody>) =>
    respond(request, {
      ...owner,
      idempotencyKey: request.headers.get("idempotency-key"),
      receive: async () => ({
        file: await importFromUrl(app, input.url, input.file_name),
        options: { exifPolicy: input.exif_policy, ttl: input.ttl, objectKey: input.object_key ?? null },
      }),
    });

  const sessionUploads = sessionRoutes(app, "user")
    .post("/api/admin/upload", ({ request, principal: p }) => fileUpload(request, { userId: p.user.id, tokenId: null }, FORM_FIELDS), { parse: "none" })
    .post("/api/admin/upload/url", ({ request, body, principal: p }) =>
      urlUpload(request, { userId: p.user.id, tokenId: null }, parseBody(urlImportBody, body)),
    );

  // Upload tokens (Bearer) rather than sessions, checked before the body is read or refused.
  const tokenUploads = uploadTokenRoutes(app)
    .post("/api/upload", ({ request, uploader: t }) => fileUpload(request, { userId: t.user.id, tokenId: t.token.id }, TOKEN_FORM_FIELDS), {
      parse: "none",
    })
    .post("/api/upload/url", ({ request, body, uploader: t }) =>
      urlUpload(request, { userId: t.user.id, tokenId: t.token.id }, parseBody(tokenUrlImportBody, body)),
    );

  return new Elysia().use(sessionUploads).use(tokenUploads);
}
