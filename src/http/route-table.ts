/**
 * Maps a method + raw path to the route template that served it ("/i/:id"),
 * so metrics never carry raw paths. Built from the router's own route list.
 */
export interface RouteTable {
  match(method: string, path: string): string | undefined;
  /** The methods some route answers at `path` (HEAD with GET), for a 405's Allow; empty when none does. */
  methodsAt(path: string): string[];
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
    methodsAt(path) {
      const methods = new Set(compiled.filter((r) => r.method !== "ALL" && r.re.test(path)).map((r) => r.method));
      if (methods.has("GET")) methods.add("HEAD");
      return [...methods].sort();
    },
  };
}
