/**
 * A Bun Worker from source text. The text becomes a Blob URL (made once per source), so the
 * single-file build carries the worker without an extra entry point; the source may import
 * only what the runtime provides (bun:sqlite, node:*).
 */
const urls = new Map<string, string>();

export function inlineWorker(source: string): Worker {
  let url = urls.get(source);
  if (url === undefined) {
    url = URL.createObjectURL(new Blob([source], { type: "application/javascript" }));
    urls.set(source, url);
  }
  return new Worker(url);
}
