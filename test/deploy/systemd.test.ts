/**
 * deploy/kura.service as shipped: `systemd-analyze verify` (against a throwaway root holding
 * the unit, a stand-in /usr/local/bin/kura and the host's own system units) must pass without
 * a single warning, and `systemd-analyze security --offline=true` must rate it 4.0 or better.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEPLOY_DIR, which } from "./proxies";

const UNIT = join(DEPLOY_DIR, "kura.service");

async function analyze(args: string[]) {
  const bin = which("systemd-analyze");
  if (!bin) throw new Error("systemd-analyze is missing (Debian package systemd; listed in .ci/setup)");
  const proc = Bun.spawn([bin, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, SYSTEMD_COLORS: "0", SYSTEMD_PAGER: "cat", SYSTEMD_LOG_TARGET: "console", LANG: "C.UTF-8" },
  });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code: await proc.exited, out, err };
}

/** `Key=value` lines of one section. */
function section(text: string, name: string): string[] {
  const start = text.indexOf(`[${name}]`);
  if (start < 0) return [];
  const rest = text.slice(start + name.length + 2);
  const end = rest.search(/^\[/m);
  return (end < 0 ? rest : rest.slice(0, end))
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

describe("deploy/kura.service", () => {
  let root: string;
  const text = readFileSync(UNIT, "utf8");

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), "kura-systemd-root-"));
    mkdirSync(join(root, "etc/systemd/system"), { recursive: true });
    mkdirSync(join(root, "usr/local/bin"), { recursive: true });
    mkdirSync(join(root, "usr/lib/systemd"), { recursive: true });
    writeFileSync(join(root, "etc/systemd/system/kura.service"), text);
    // verify checks that ExecStart's program exists and is executable inside the root.
    writeFileSync(join(root, "usr/local/bin/kura"), "#!/bin/sh\nexit 0\n");
    chmodSync(join(root, "usr/local/bin/kura"), 0o755);
    // The targets the unit refers to (multi-user.target, network-online.target, …).
    const systemUnits = ["/usr/lib/systemd/system", "/lib/systemd/system"].find((d) => existsSync(join(d, "multi-user.target")));
    if (!systemUnits) throw new Error("no systemd unit directory on this host (install Debian systemd)");
    cpSync(realpathSync(systemUnits), join(root, "usr/lib/systemd/system"), { recursive: true, dereference: false });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  test("has the sections and hardening the README promises", () => {
    const service = section(text, "Service");
    for (const line of [
      "User=kura",
      "ExecStart=/usr/local/bin/kura serve",
      "StateDirectory=kura",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "PrivateTmp=yes",
      "UMask=0077",
      "Restart=always",
      // Exit 2 (an invalid KURA_* value) needs an edit; restarting into it every 2 s never trips the start limit.
      "RestartPreventExitStatus=2",
      "Environment=KURA_DATA_DIR=/var/lib/kura",
      "Environment=KURA_LISTEN=127.0.0.1:8080",
      "Environment=KURA_TRUSTED_PROXIES=127.0.0.1,::1",
    ]) {
      expect(service).toContain(line);
    }
    expect(section(text, "Unit").some((l) => l.startsWith("Description="))).toBe(true);
    expect(section(text, "Install")).toContain("WantedBy=multi-user.target");
    // Bun's JIT needs W+X memory: this would make the service crash at start.
    expect(service.some((l) => /^MemoryDenyWriteExecute=(yes|true|1)/.test(l))).toBe(false);
  });

  test("systemd-analyze verify passes without warnings", async () => {
    const r = await analyze(["verify", `--root=${root}`, "kura.service"]);
    expect(r.err.trim()).toBe("");
    expect(r.code).toBe(0);
  });

  test("systemd-analyze verify does report a broken unit (the check is live)", async () => {
    writeFileSync(join(root, "etc/systemd/system/kura-broken.service"), text.replace(/^Restart=always$/m, "Restart=sometimes"));
    const r = await analyze(["verify", `--root=${root}`, "kura-broken.service"]);
    expect(r.err, JSON.stringify(r)).toMatch(/restart/i);
  });

  async function exposure(unit: string): Promise<number> {
    const r = await analyze(["security", "--offline=true", `--root=${root}`, unit]);
    const m = new RegExp(`Overall exposure level for ${unit.replace(".", "\\.")}:\\s*([\\d.]+)`).exec(r.out);
    if (!m) throw new Error(`no exposure level in:\n${r.out}${r.err}`);
    return Number(m[1]);
  }

  test("systemd-analyze security --offline=true rates it 4.0 or better", async () => {
    expect(await exposure("kura.service")).toBeLessThanOrEqual(4.0);
  });

  test("the old README fragment (no sandbox) is rated far worse, so the score is really read", async () => {
    writeFileSync(
      join(root, "etc/systemd/system/kura-fragment.service"),
      "[Service]\nExecStart=/usr/local/bin/kura serve\nEnvironment=KURA_DATA_DIR=/var/lib/kura KURA_LISTEN=0.0.0.0:8080\nRestart=always\n",
    );
    expect(await exposure("kura-fragment.service")).toBeGreaterThan(9);
  });
});
