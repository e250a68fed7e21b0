/** deploy/nginx.conf, adapted to loopback ports and a throwaway certificate, in front of a real Kura. */
import { describe } from "bun:test";
import { startNginx } from "./proxies";
import { proxyScenarios } from "./proxy-scenarios";

describe("deploy/nginx.conf with real nginx", () => {
  proxyScenarios("nginx", startNginx);
});
