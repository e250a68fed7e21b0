/**
 * Maps a method + raw path to the route template that served it ("/i/:id"),
 * so metrics never carry raw paths. Built from the router's own route list.
 */
export interface RouteTable {
  match(method: string, path: string): string | undefined;
}

export function buildRouteTable(routes: { method: string; path: string }[]): RouteTable {
  const compiled = routes
    .map((r) => {
      const segments = r.path.split("/");
      const pattern = segments.map((s) => (s === "*" ? ".*" : s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("/");
      const staticCount = segments.filter((s) => s && s !== "*" && !s.startsWith(":")).length;
      return { method: r.method, path: r.path, re: new RegExp(`^${pattern}$`), staticCount, wildcard: r.path.endsWith("*") };
    })
    // Like the router: static segments win over parameters, parameters over wildcards.
    .sort((a, b) => Number(a.wildcard) - Number(b.wildcard) || b.staticCount - a.staticCount);
  return {
    match(method, path) {
      const m = method === "HEAD" ? ["HEAD", "GET"] : [method];
      return compiled.find((r) => (m.includes(r.method) || r.method === "ALL") && r.re.test(path))?.path;
    },
  };
}
