/**
 * The weight (`q`) of one member of an HTTP preference list (Accept, Accept-Encoding), given the
 * parameters after its `;`. A malformed weight counts as the default 1, as most servers do.
 */
export function qValue(params: string[]): number {
  for (const p of params) {
    const eq = p.indexOf("=");
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== "q") continue;
    const raw = p.slice(eq + 1).trim();
    const q = Number(raw);
    return raw !== "" && Number.isFinite(q) ? q : 1;
  }
  return 1;
}
