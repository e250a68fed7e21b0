import { randomBytes } from "node:crypto";
import { ApiError, jsonError } from "../http/errors";
import { errorResponse, toS3Error } from "../s3/errors";
import { isS3Path } from "../shared/url-target";
import { cheveretoError } from "./chevereto";
import { CHEVERETO_CODE } from "./chevereto-errors";
import { lskyResponse } from "./lsky";

type Surface = "lsky" | "chevereto" | "s3" | "kura";

/** Which API a path belongs to: clients of the Lsky Pro, Chevereto and S3 APIs parse only their own shape. */
function surfaceOf(path: string): Surface {
  if (isS3Path(path)) return "s3";
  if (path === "/api/v1" || path.startsWith("/api/v1/")) return "lsky";
  if (path === "/api/1" || path.startsWith("/api/1/")) return "chevereto";
  return "kura";
}

/**
 * An error that no route of the surface produced (a body over the 1 MiB cap, an unusable `Host`,
 * an unknown path outside /api/1/), in the error shape of the surface the path belongs to:
 * Lsky's `{status: false, message, data: {}}`, Chevereto's `{status_code, error, status_txt}`,
 * S3's XML `<Error>`, Kura's `{"error": "…"}` elsewhere. The status stays: these are refusals before any controller,
 * which Lsky (Laravel's router) and Chevereto (its web server) answer with theirs too.
 */
export function surfaceError(path: string, status: number, message: string, headers: Record<string, string> = {}): Response {
  const surface = surfaceOf(path);
  if (surface === "lsky") return lskyResponse(status, false, message, {}, headers);
  if (surface === "chevereto") return Response.json(cheveretoError(status, message), { status, headers });
  // Spec 4.13: the /s3/ surface answers XML errors, also before its router (an unusable Host, a
  // write whose commit could not be made durable); S3 clients cannot read a JSON body.
  if (surface === "s3") {
    const requestId = randomBytes(8).toString("hex").toUpperCase();
    return errorResponse(toS3Error(new ApiError(status, message, headers)), { method: "", resource: path, requestId });
  }
  return jsonError(status, message, headers);
}

/**
 * An unknown path or method (405 for a known path under another method). Under /api/1/ that is Chevereto's "Invalid API action" (400, code
 * 120: its API route takes any action name and refuses all but `upload`); elsewhere a 404 in the
 * surface's shape (Laravel's router answers Lsky's unknown routes with a 404 too).
 */
export function unknownRoute(path: string, method: string, allowed: readonly string[]): Response {
  const surface = surfaceOf(path);
  // A path that exists under another method: 405 with Allow (RFC 9110 15.5.6), as the S3 surface
  // answers and Laravel does for Lsky's routes, instead of a 404 saying the endpoint does not exist.
  if (surface !== "chevereto" && allowed.length > 0 && !allowed.includes(method)) {
    const allow = allowed.join(", ");
    const message = `该接口不支持 ${method.slice(0, 16)} 方法（可用：${allow}）`;
    // Image access answers its errors in plain text (spec 7), not the API's JSON.
    if (path.startsWith("/i/") || path.startsWith("/o/")) {
      return new Response(message, { status: 405, headers: { allow, "content-type": "text/plain; charset=utf-8" } });
    }
    return surfaceError(path, 405, message, { allow });
  }
  if (surface !== "chevereto") return surfaceError(path, 404, "接口不存在");
  const message = "无效的 API 操作：Chevereto 兼容接口只有 GET 或 POST /api/1/upload";
  return Response.json(cheveretoError(400, message, CHEVERETO_CODE.action), { status: 400 });
}

/** A Kura-shaped answer given before routing, re-shaped for the surface of its path. */
export async function inSurfaceEnvelope(path: string, answer: Response): Promise<Response> {
  if (surfaceOf(path) === "kura") return answer;
  const { error } = (await answer.json()) as { error: string };
  const headers = Object.fromEntries([...answer.headers].filter(([name]) => name !== "content-type" && name !== "content-length"));
  return surfaceError(path, answer.status, error, headers);
}
