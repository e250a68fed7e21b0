/** Reads one sample from a /metrics exposition ("name{labels}" exactly as printed); 0 when absent. */
export async function metricValue(base: string, sample: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}
