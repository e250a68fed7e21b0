import { jsonError } from "../http/errors";
import { cheveretoError } from "./chevereto";
import { lskyResponse } from "./lsky";

type Surface = "lsky" | "chevereto" | "kura";

/** Which API a path belongs to: clients of the Lsky Pro and Chevereto APIs parse only their own shape. */
function surfaceOf(path: string): Surface {
  if (path === "/api/v1" || path.startsWith("/api/v1/")) return "lsky";
  if (path === "/api/1" || path.startsWith("/api/1/")) return "chevereto";
  return "kura";
}

/**
 * An error that no route of the surface produced (an unknown path or method, a body over the
 * 1 MiB cap, an unusable `Host`), in the error shape of the surface the path belongs to:
 * Lsky's `{status: false, message, data: {}}`, Chevereto's `{status_code, error, status_txt}`,
 * Kura's `{"error": "…"}` elsewhere. The status stays: these are refusals before any controller,
 * which Lsky (Laravel's router) and Chevereto answer with theirs too.
 */
export function surfaceError(path: string, status: number, message: string, headers: Record<string, string> = {}): Response {
  const surface = surfaceOf(path);
  if (surface === "lsky") return lskyResponse(status, false, message, {}, headers);
  if (surface === "chevereto") return Response.json(cheveretoError(status, message), { status, headers });
  return jsonError(status, message, headers);
}

/** A Kura-shaped answer given before routing, re-shaped for the surface of its path. */
export async function inSurfaceEnvelope(path: string, answer: Response): Promise<Response> {
  if (surfaceOf(path) === "kura") return answer;
  const { error } = (await answer.json()) as { error: string };
  const headers = Object.fromEntries([...answer.headers].filter(([name]) => name !== "content-type" && name !== "content-length"));
  return surfaceError(path, answer.status, error, headers);
}
