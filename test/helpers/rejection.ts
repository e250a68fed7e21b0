import { expect } from "bun:test";

/** The error `promise` rejects with; fails the test when it resolves instead. */
export async function errorOf(promise: Promise<unknown>): Promise<Error> {
  const result = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(result).toBeInstanceOf(Error);
  return result as Error;
}
