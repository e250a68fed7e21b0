// Chevereto API v1 compatible upload (POST or GET /api/1/upload), for ShareX's built-in Chevereto
// uploader and bots written against Chevereto. `key` is an upload token; the upload runs
// through the one upload pipeline (limits, quota, rate limits, idempotency, metrics).
import { Elysia } from "elysia";
import { authenticateUploadTokenText, type TokenPrincipal } from "../../auth/tokens";
import { cheveretoError, cheveretoFormat, cheveretoImage, cheveretoImgbbSuccess, cheveretoSuccess, type CheveretoFormat } from "../../compat/chevereto";
import { cheveretoSource, discardInput, readCheveretoInput, type CheveretoInput } from "../../compat/chevereto-input";
import { cheveretoFailure } from "../../compat/chevereto-errors";
import { cheveretoExpirationSeconds } from "../../compat/chevereto-expiration";
import { compatImage, storedDigests } from "../../compat/common";
import type { AppContext } from "../../context";
import { runUpload } from "../../images/upload/service";
import { answerableError, logCrash } from "../disk-full";
import { ApiError, badRequest } from "../errors";
import { publicOrigin } from "../request-info";

function render(format: CheveretoFormat, status: number, body: object, text: string, location?: string): Response {
  if (format === "redirect" && location) return new Response(null, { status: 302, headers: { location } });
  if (format !== "json") return new Response(text, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json; charset=utf-8" } });
}

function authenticateKey(app: AppContext, key: string | undefined): TokenPrincipal {
  if (!key) throw new ApiError(401, "缺少 key：请提供上传令牌（参数 key 或请求头 X-API-Key）");
  return authenticateUploadTokenText(app, key);
}

export function cheveretoRoutes(app: AppContext) {
  const upload = async (request: Request): Promise<Response> => {
    const query = new URL(request.url).searchParams;
    let format = cheveretoFormat(query.get("format"));
    let input: CheveretoInput | undefined;
    // A slot of the pool for unauthenticated bodies, then (once the key checks out) the upload's own.
    let pending: (() => void) | undefined;
    let admitted: (() => void) | undefined;
    try {
      // A key in the header or query is checked before the body is read.
      let key = request.headers.get("x-api-key") ?? query.get("key") ?? undefined;
      let principal: TokenPrincipal | undefined;
      if (!key) {
        // A key inside the form (ShareX sends it there, before the file) is checked the moment
        // its field has arrived: a wrong one ends the read at once, a right one moves the upload
        // from the small pool for unauthenticated bodies to the max_concurrent_uploads slots.
        pending = app.uploadGate.reserveFormKey();
        input = await readCheveretoInput(app, request, (name, value) => {
          // The error of a wrong key comes in the format the form asked for, if it said so first.
          if (name === "format") format = cheveretoFormat(value);
          if (name !== "key") return;
          if (principal) {
            if (value !== key) throw badRequest("表单中有多个不同的 key");
            return;
          }
          key = value;
          principal = authenticateKey(app, value);
          admitted = app.uploadGate.admit(principal.user.id);
          pending?.();
        });
        format = cheveretoFormat(input.fields.format);
      }
      const t = principal ?? authenticateKey(app, key);
      // Admitted while the form was read: the pipeline takes that slot instead of another.
      const held = admitted;
      const gate = held ? { admit: () => held } : app.uploadGate;
      const outcome = await runUpload(app, gate, {
        userId: t.user.id,
        tokenId: t.token.id,
        idempotencyKey: request.headers.get("idempotency-key"),
        digests: true,
        receive: async () => {
          input ??= await readCheveretoInput(app, request);
          format = cheveretoFormat(input.fields.format ?? query.get("format"));
          // Read before the source, so a refused value costs no URL import.
          const ttl = cheveretoExpirationSeconds(input.fields.expiration);
          return { file: await cheveretoSource(app, input), options: { ttl } };
        },
      });
      const view = app.images.view(outcome.id)!;
      const md5 = outcome.md5 ?? (await storedDigests(app, view)).md5;
      const image = cheveretoImage(compatImage(app, view, publicOrigin(request, app.settings.get().base_url)), md5);
      // A replay whose key was in the header or query leaves the body unread: only the query tells then.
      const imgbb = input?.imgbb ?? query.has("image");
      return render(format, 200, imgbb ? cheveretoImgbbSuccess(image) : cheveretoSuccess(image), image.url, image.url);
    } catch (caught) {
      const err = answerableError(app.log, request, caught);
      if (!err) {
        logCrash(app.log, request, caught);
        return render(format, 500, cheveretoError(500, "服务器内部错误"), "服务器内部错误");
      }
      // Chevereto's 400 and code where Chevereto's route has one, Kura's status otherwise (chevereto-errors.ts).
      const failure = cheveretoFailure(err, caught);
      const res = render(format, failure.status, cheveretoError(failure.status, err.message, failure.code), err.message);
      for (const [name, value] of Object.entries(failure.headers)) res.headers.set(name, value);
      return res;
    } finally {
      // A file part the pipeline never took (bad key, 429, replay) must not stay in tmp.
      await discardInput(input);
      pending?.();
      admitted?.();
    }
  };

  // GET with query parameters too: Chevereto V3 and V4 read $_REQUEST, and the Chevereto-Free API
  // docs give `GET /api/1/upload/?key=…&source=<image URL>&format=json` as their example call.
  return new Elysia().post("/api/1/upload", ({ request }) => upload(request), { parse: "none" }).get("/api/1/upload", ({ request }) => upload(request));
}
