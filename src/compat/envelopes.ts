import { cheveretoError } from "./chevereto";
import { lskyResponse } from "./lsky";

/**
 * An answer Kura gives before a request reaches its route (a body over the 1 MiB cap, an unusable
 * `Host`), in the error shape of the surface the path belongs to: clients of the Lsky Pro and
 * Chevereto APIs parse only their own shape. Other paths keep Kura's `{"error": "…"}`.
 */
export async function inSurfaceEnvelope(path: string, answer: Response): Promise<Response> {
  const lsky = path.startsWith("/api/v1/");
  if (!lsky && !path.startsWith("/api/1/")) return answer;
  const { error } = (await answer.json()) as { error: string };
  const headers = Object.fromEntries([...answer.headers].filter(([name]) => name !== "content-type" && name !== "content-length"));
  if (lsky) return lskyResponse(answer.status, false, error, {}, headers);
  return Response.json(cheveretoError(answer.status, error), { status: answer.status, headers });
}
