/**
 * The upload-token surfaces that command-line tools call: the native upload API and the
 * Lsky Pro / Chevereto compatible ones.
 *
 * Their answers carry `Connection: close`. PicGo's CLI (and Typora, which runs it) keeps
 * its HTTP agent's socket open after an upload and does not exit until the server drops
 * it, i.e. until the idle timeout. Closing after each answer lets it exit at once; these
 * are one-shot requests from short-lived processes, so the lost reuse costs nothing,
 * while image delivery and the console keep their keep-alive connections.
 */
export function closesConnection(path: string): boolean {
  return path === "/api/upload" || path.startsWith("/api/upload/") || path.startsWith("/api/v1/") || path.startsWith("/api/1/");
}
