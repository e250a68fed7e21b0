import { getOrCreate } from "./get-or-create";

/**
 * A Bun Worker from source text. The text becomes a Blob URL (made once per source), so the
 * single-file build carries the worker without an extra entry point; the source may import
 * only what the runtime provides (bun:sqlite, node:*).
 */
const urls = new Map<string, string>();

export function inlineWorker(source: string): Worker {
  return new Worker(getOrCreate(urls, source, () => URL.createObjectURL(new Blob([source], { type: "application/javascript" }))));
}
