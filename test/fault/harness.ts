/**
 * Real faults for the fault tier: a small tmpfs that fills up, and a TCP proxy in front of a
 * channel peer that can pass traffic, hold the request we are waiting for (so a `kill -9` lands
 * at exactly that point, without sleeps), or accept connections and never answer.
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync, writeSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { KuraServer } from "../helpers/server";

/** This process's hard limit of open files (a server it starts inherits it; Bun raises its soft limit to it). */
export const hardOpenFileLimit = () => Number(/^Max open files\s+\S+\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"))![1]);

/** How many descriptors process `pid` holds now. */
export const openDescriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/**
 * Sets process `pid`'s soft limit of open files with prlimit (failing on any complaint). The soft
 * limit only: raising a hard limit again takes CAP_SYS_RESOURCE, which a sandbox's root may lack.
 */
export function setSoftOpenFileLimit(pid: number, n: number) {
  const run = Bun.spawnSync(["prlimit", `--pid=${pid}`, `--nofile=${n}:`], { stderr: "pipe" });
  const complaint = run.stderr.toString();
  if (complaint !== "") throw new Error(`prlimit: ${complaint}`);
}

/** A tmpfs of `sizeMb` MiB (needs root, as in CI); `unmount` also removes the mount point. */
export function mountTmpfs(sizeMb: number): { dir: string; unmount: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "kura-fault-fs-"));
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${sizeMb}m`, "tmpfs", dir], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`mount tmpfs failed (the fault tier runs as root): ${r.stderr}`);
  return {
    dir,
    unmount: () => {
      spawnSync("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A small ext4 file system on a loop device, mounted with `errors=remount-ro` as most VPS images
 * mount their root. `fail()` makes ext4 meet an error (its own sysfs trigger), after which the
 * kernel turns the file system read-only at once, files held open for writing included: the
 * fault a tmpfs or a plain `remount,ro` cannot give (both refuse while a file is open for
 * writing). `repair()` is what the operator does: unmount, fsck, mount again.
 */
export function mountFailableExt4(sizeMb: number): { dir: string; fail: () => void; repair: () => void; unmount: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "kura-fault-ext4-"));
  const image = `${dir}.img`;
  const run = (cmd: string[]) => {
    const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${cmd.join(" ")} failed (the fault tier runs as root): ${r.stderr}`);
    return r.stdout.trim();
  };
  run(["truncate", "-s", `${sizeMb}M`, image]);
  run(["mkfs.ext4", "-q", "-F", image]);
  const mount = () => run(["mount", "-o", "loop,errors=remount-ro", image, dir]);
  mount();
  const device = () => run(["findmnt", "-n", "-o", "SOURCE", "--target", dir]).replace("/dev/", "");
  return {
    dir,
    fail: () => writeFileSync(`/sys/fs/ext4/${device()}/trigger_fs_error`, "kura fault test"),
    repair: () => {
      run(["umount", dir]);
      // e2fsck exits 1 when it corrected errors (the one trigger_fs_error recorded): repaired.
      const fsck = spawnSync("e2fsck", ["-fy", image], { encoding: "utf8" });
      if (fsck.status !== 0 && fsck.status !== 1) throw new Error(`e2fsck exited ${fsck.status}: ${fsck.stdout}${fsck.stderr}`);
      mount();
    },
    unmount: () => {
      spawnSync("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
      rmSync(image, { force: true });
    },
  };
}

export const freeBytes = (dir: string) => {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
};

/** Writes a filler file until the file system has at most `leaveBytes` free; returns its path. */
export function fillDisk(dir: string, leaveBytes = 0, name = "filler.bin"): string {
  const path = join(dir, name);
  const fd = openSync(path, "a");
  const chunk = Buffer.alloc(64 * 1024, 0x5a);
  try {
    for (;;) {
      const room = freeBytes(dir) - leaveBytes;
      if (room <= 0) break;
      try {
        writeSync(fd, chunk, 0, Math.min(chunk.length, room));
      } catch {
        break; // ENOSPC: full
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

type Mode = "pass" | "blackhole";

/** Body bytes a stalled answer passes before it goes silent. */
const STALL_BODY_BYTES = 16;

/**
 * A TCP proxy to `upstreamPort`. Every chunk a client sends is checked against the hold rule:
 * when it matches, that connection stops being forwarded (the peer "hangs" mid-request) and
 * `held` resolves. In blackhole mode connections are accepted and nothing is ever answered,
 * on new connections and on open ones from their next request. With a stall rule
 * (`stallResponses`), matching requests are answered with the headers and a few body bytes only.
 */
export class FaultProxy {
  readonly sockets = new Set<net.Socket>();
  /** Connections accepted so far (to see pile-ups). */
  accepted = 0;
  private holdRule: ((chunk: string) => boolean) | undefined;
  /** Requests whose answers stop after the headers and a few body bytes (see stallResponses). */
  private stallRule: ((chunk: string) => boolean) | undefined;
  /** Requests matched by the stall rule so far (their answers stall once they come). */
  stalledRequests = 0;
  private onHeld: ((chunk: string) => void) | undefined;
  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    public mode: Mode,
    private readonly upstreamPort: number,
  ) {}

  static async start(upstreamPort: number, mode: Mode = "pass"): Promise<FaultProxy> {
    let proxy!: FaultProxy;
    const server = net.createServer((client) => proxy.accept(client));
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    proxy = new FaultProxy(server, (server.address() as net.AddressInfo).port, mode, upstreamPort);
    return proxy;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Resolves with the first chunk matching `rule` once one arrives; that request never gets through. */
  hold(rule: (chunk: string) => boolean): Promise<string> {
    return new Promise((resolve) => {
      this.holdRule = rule;
      this.onHeld = resolve;
    });
  }

  /**
   * From now on, a request matching `rule` reaches the peer, but its answer stops after the
   * headers and STALL_BODY_BYTES of body, with the connection left open (a peer that hangs
   * mid-body). `undefined` lets answers through again.
   */
  stallResponses(rule: ((chunk: string) => boolean) | undefined) {
    this.stallRule = rule;
  }

  release() {
    this.holdRule = undefined;
    this.onHeld = undefined;
  }

  /** Connections currently open from the client side. */
  get openConnections() {
    return [...this.sockets].filter((s) => !s.destroyed).length;
  }

  private accept(client: net.Socket) {
    this.accepted++;
    this.sockets.add(client);
    client.on("close", () => this.sockets.delete(client));
    client.on("error", () => {});
    if (this.mode === "blackhole") return; // read nothing, answer nothing
    const upstream = net.connect(this.upstreamPort, "127.0.0.1");
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    let held = false;
    /** Bytes of the current answer still to pass when it is to stall; undefined = all. */
    let stallAfter: number | undefined;
    // A stalled answer stays stalled even when the peer itself closes (s3rver drops a connection
    // idle for 5 s, and from its side the answer was sent): a hung peer never says goodbye.
    upstream.on("close", () => {
      if (stallAfter === undefined) client.destroy();
    });
    let answer = Buffer.alloc(0);
    client.on("data", (chunk) => {
      if (held) return;
      if (this.mode === "blackhole") {
        held = true; // a pooled connection goes silent too, mid-conversation
        return;
      }
      const text = chunk.toString("latin1");
      if (this.holdRule?.(text)) {
        held = true;
        const notify = this.onHeld;
        this.release();
        notify?.(text);
        return;
      }
      if (this.stallRule?.(text)) {
        stallAfter = -1; // known once the headers have arrived
        this.stalledRequests++;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (held) return;
      if (stallAfter === undefined) return void client.write(chunk);
      if (stallAfter === -1) {
        answer = Buffer.concat([answer, chunk as Buffer]);
        const end = answer.indexOf("\r\n\r\n");
        if (end < 0) return;
        client.write(answer.subarray(0, end + 4 + STALL_BODY_BYTES));
        stallAfter = 0; // everything after those bytes is swallowed: the answer never ends
      }
    });
  }

  async stop() {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((done) => this.server.close(() => done()));
  }
}

/** A Kura (and its admin session) whose data dir is on a fresh failable ext4; `disks` collects the disk for the file's afterAll. */
export async function kuraOnFailableDisk(disks: ReturnType<typeof mountFailableExt4>[], sizeMb = 64) {
  const disk = mountFailableExt4(sizeMb);
  disks.push(disk);
  const dataDir = join(disk.dir, "data");
  mkdirSync(dataDir);
  const server = await KuraServer.start({ dataDir });
  return { disk, dataDir, server, admin: await adminSession(server) };
}
