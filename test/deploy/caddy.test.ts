/** deploy/Caddyfile, adapted to loopback ports and Caddy's internal CA, in front of a real Kura. */
import { describe } from "bun:test";
import { startCaddy } from "./proxies";
import { proxyScenarios } from "./proxy-scenarios";

describe("deploy/Caddyfile with real Caddy", () => {
  proxyScenarios("caddy", startCaddy);
});
