/**
 * Loopback ports for peers that must be told their port before they start (nginx, Caddy, sshd,
 * Apache, a compiled Kura): free a moment ago, bound by the peer right after; a clash fails loudly.
 */

/**
 * `n` distinct ports. The probes are all held until the last is taken: two probes opened one after
 * the other could get the same port back (it happened: nginx's HTTP and HTTPS listens on one port,
 * so the redirect server inherited `ssl` without a certificate and nginx refused to start).
 */
export function freePorts(n: number): number[] {
  const probes = Array.from({ length: n }, () => Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } }));
  const ports = probes.map((probe) => probe.port);
  for (const probe of probes) probe.stop(true);
  return ports;
}

/** One port free a moment ago. */
export function freePort(): number {
  return freePorts(1)[0]!;
}
