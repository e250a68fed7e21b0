/**
 * Marks a promise as handled now and returns it, for one that is awaited only later (after
 * other awaits): an early rejection would otherwise count as unhandled, which ends the
 * process. Whoever awaits it still gets the rejection.
 */
export function awaitedLater<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}
