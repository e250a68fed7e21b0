/**
 * Throws when another socket already listens on `listen`. A listener opened with SO_REUSEPORT
 * (needed for delivery threads) would otherwise share the port with another process of the
 * same user instead of failing, and silently get half its connections. Bound and closed
 * synchronously enough for a start-up check; the race with a process starting at the same
 * instant is accepted.
 */
export function assertPortFree(listen: { hostname: string; port: number }) {
  if (listen.port === 0) return;
  const probe = Bun.listen({ hostname: listen.hostname, port: listen.port, socket: { data() {} } });
  probe.stop(true);
}
