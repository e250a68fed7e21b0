import { LOOPBACK_AND_PRIVATE, normalizeAddress, parseAddressSet, type AddressSet } from "../net/cidr";
import type { Logger } from "../ops/log";

const LOCAL_NETWORKS = parseAddressSet(LOOPBACK_AND_PRIVATE);

/**
 * Helps an operator who put Kura behind a reverse proxy but forgot KURA_TRUSTED_PROXIES:
 * then every client looks like the proxy (one shared login rate-limit bucket, /metrics
 * open to everyone through it, http links). The first request from a loopback/private
 * peer that is not trusted yet carries X-Forwarded-For logs one warning naming the
 * variable; later ones stay quiet so the log is not flooded.
 */
export function proxyMisconfigurationHint(trusted: AddressSet, log: Logger) {
  let warned = false;
  return (peer: string, headers: Headers): void => {
    if (warned || !headers.has("x-forwarded-for")) return;
    const address = normalizeAddress(peer);
    if (!address || trusted.has(address) || !LOCAL_NETWORKS.has(address)) return;
    warned = true;
    log.warn(
      "收到来自内网地址的 X-Forwarded-For，但该地址不在 KURA_TRUSTED_PROXIES 中：如果 Kura 位于反向代理之后，请把代理地址加入 KURA_TRUSTED_PROXIES，否则所有请求都被视为来自代理（此提示只出现一次）",
      {
        peer: address,
      },
    );
  };
}
