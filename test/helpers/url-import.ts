import { expect } from "bun:test";
import { existsSync } from "node:fs";
import { fetchToFile, type FetchToFileOptions, UrlImportError } from "../../src/net/safe-fetch";

/**
 * The UrlImportError `fetchToFile` refuses `url` with, having left nothing at `dest`; fails the
 * test when the download succeeds or fails with anything else.
 */
export async function importRefusal(url: string, dest: string, opts: FetchToFileOptions): Promise<UrlImportError> {
  const err = await fetchToFile(url, dest, opts).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UrlImportError);
  expect(existsSync(dest)).toBe(false);
  return err as UrlImportError;
}
