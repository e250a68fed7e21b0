/**
 * A programmable SFTP server (ssh2 `Server`) in the test's own process, for answers no real server gives: listings
 * that never end, huge names, endless nesting, a slow but steady directory, reads that end early. Plain files and
 * directories come from `root` on disk. It accepts any user with the password `peer.password`.
 */
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { type Connection, Server, utils } from "ssh2";

const STATUS = utils.sftp.STATUS_CODE;
const fileAttrs = (size: number) => ({ mode: 0o100644, uid: 0, gid: 0, size, atime: 1_600_000_000, mtime: 1_600_000_000 });
const dirAttrs = () => ({ mode: 0o040755, uid: 0, gid: 0, size: 0, atime: 1_600_000_000, mtime: 1_600_000_000 });

export interface PeerControl {
  /** endless: 100 new files per READDIR, never EOF; hugename: 8 names of 30,000 bytes each, never EOF;
   *  deep: every directory holds one directory "d"; slow: `replies` batches of 100 files, one every `delayMs`. */
  readdir?: "endless" | "hugename" | "deep" | "slow";
  replies?: number;
  delayMs?: number;
  /** zero: every READ answers EOF at once. */
  read?: "zero";
}

export interface SftpPeer {
  port: number;
  password: string;
  ctl: PeerControl;
  /** `openDirs`: directory handles opened and not yet closed, over all connections. */
  /** `authAttempts`: authentication requests of any method (a client that refused the host key makes none). */
  stats: { readdir: number; opendir: number; openDirs: number; passwordsOffered: number; authAttempts: number };
  /** An impostor on the same address: the server is restarted on the same port with a new host key. */
  replaceHostKey(): Promise<void>;
  /** The current host key's fingerprint as `ssh-keygen -l` prints it (SHA256:<base64 without padding>). */
  fingerprint(): string;
  /** The current host key as a known_hosts line for this address. */
  knownHostsLine(): string;
  stop(): Promise<void>;
}

/**
 * An ed25519 host key ssh2 can read back. About 1 in 256 of the keys ssh2's generateKeyPairSync
 * writes cannot be parsed (it strips a leading zero byte of the public key: mscdex/ssh2#1390,
 * #1513), which failed a CI run; such a key is simply made again.
 */
function newHostKey(): string {
  for (;;) {
    const pair = utils.generateKeyPairSync("ed25519");
    if (!(utils.parseKey(pair.private) instanceof Error) && !(utils.parseKey(pair.public) instanceof Error)) return pair.private;
  }
}

export async function startSftpPeer(root: string): Promise<SftpPeer> {
  const password = `peer-${randomBytes(6).toString("hex")}`;
  let hostKey = newHostKey();
  const ctl: PeerControl = {};
  const stats = { readdir: 0, opendir: 0, openDirs: 0, passwordsOffered: 0, authAttempts: 0 };
  const clients = new Set<Connection>();
  const abs = (p: string) => join(root, p);

  const serve = (client: Connection) => {
    clients.add(client);
    client.on("close", () => clients.delete(client));
    client.on("error", () => {});
    client.on("authentication", (ctx) => {
      stats.authAttempts++;
      if (ctx.method !== "password") return ctx.reject(["password"]);
      stats.passwordsOffered++;
      return ctx.password === password ? ctx.accept() : ctx.reject(["password"]);
    });
    client.on("ready", () => {
      client.on("session", (accept) => {
        accept().on("sftp", (acceptSftp) => {
          const sftp = acceptSftp();
          // A dropped connection frees its handles, as a real server does.
          sftp.on("close", () => {
            for (const h of handles.values()) if (h.dir !== undefined) stats.openDirs--;
            handles.clear();
          });
          const handles = new Map<string, { fd?: number; dir?: string; n: number; done?: boolean }>();
          let next = 1;
          const newHandle = (h: { fd?: number; dir?: string }) => {
            const id = String(next++);
            handles.set(id, { ...h, n: 0 });
            if (h.dir !== undefined) stats.openDirs++;
            return Buffer.from(id);
          };
          const fail = (reqid: number, err: unknown) =>
            sftp.status(reqid, (err as NodeJS.ErrnoException)?.code === "ENOENT" ? STATUS.NO_SUCH_FILE : STATUS.FAILURE);
          const stat = (reqid: number, p: string) => {
            try {
              const st = fs.statSync(abs(p));
              sftp.attrs(reqid, st.isDirectory() ? dirAttrs() : fileAttrs(st.size));
            } catch (err) {
              fail(reqid, err);
            }
          };
          sftp.on("STAT", stat);
          sftp.on("LSTAT", stat);
          // Writes, as far as a deep probe (write, read back, delete) needs them.
          sftp.on("OPEN", (reqid, p, flags) => {
            try {
              sftp.handle(reqid, newHandle({ fd: fs.openSync(abs(p), utils.sftp.flagsToString(flags) ?? "r") }));
            } catch (err) {
              fail(reqid, err);
            }
          });
          sftp.on("FSTAT", (reqid, h) => {
            const x = handles.get(h.toString());
            if (x?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
            sftp.attrs(reqid, fileAttrs(fs.fstatSync(x.fd).size));
          });
          sftp.on("READ", (reqid, h, offset, length) => {
            const x = handles.get(h.toString());
            if (x?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
            if (ctl.read === "zero") return sftp.status(reqid, STATUS.EOF);
            const buf = Buffer.alloc(length);
            const n = fs.readSync(x.fd, buf, 0, length, offset);
            return n === 0 ? sftp.status(reqid, STATUS.EOF) : sftp.data(reqid, buf.subarray(0, n));
          });
          sftp.on("WRITE", (reqid, h, offset, data) => {
            const x = handles.get(h.toString());
            if (x?.fd === undefined) return sftp.status(reqid, STATUS.FAILURE);
            fs.writeSync(x.fd, data, 0, data.length, offset);
            sftp.status(reqid, STATUS.OK);
          });
          const change = (reqid: number, act: () => void) => {
            try {
              act();
              sftp.status(reqid, STATUS.OK);
            } catch (err) {
              fail(reqid, err);
            }
          };
          sftp.on("MKDIR", (reqid, p) => change(reqid, () => fs.mkdirSync(abs(p))));
          sftp.on("REMOVE", (reqid, p) => change(reqid, () => fs.unlinkSync(abs(p))));
          sftp.on("RENAME", (reqid, from, to) => change(reqid, () => fs.renameSync(abs(from), abs(to))));
          sftp.on("CLOSE", (reqid, h) => {
            const x = handles.get(h.toString());
            if (x?.fd !== undefined) fs.closeSync(x.fd);
            if (x?.dir !== undefined) stats.openDirs--;
            handles.delete(h.toString());
            sftp.status(reqid, STATUS.OK);
          });
          sftp.on("OPENDIR", (reqid, p) => {
            stats.opendir++;
            if (ctl.readdir) return sftp.handle(reqid, newHandle({ dir: p }));
            try {
              if (!fs.statSync(abs(p)).isDirectory()) return sftp.status(reqid, STATUS.FAILURE);
              sftp.handle(reqid, newHandle({ dir: p }));
            } catch (err) {
              fail(reqid, err);
            }
          });
          sftp.on("READDIR", (reqid, h) => {
            stats.readdir++;
            const x = handles.get(h.toString());
            if (x?.dir === undefined) return sftp.status(reqid, STATUS.FAILURE);
            const n = ++x.n;
            const files = (count: number, name: (i: number) => string) =>
              Array.from({ length: count }, (_, i) => ({ filename: name(i), longname: "", attrs: fileAttrs(1) }));
            switch (ctl.readdir) {
              case "endless":
                return sftp.name(
                  reqid,
                  files(100, () => `f-${randomBytes(12).toString("hex")}`),
                );
              case "hugename":
                return sftp.name(
                  reqid,
                  files(8, () => randomBytes(15_000).toString("hex")),
                );
              case "deep":
                return n > 1 ? sftp.status(reqid, STATUS.EOF) : sftp.name(reqid, [{ filename: "d", longname: "", attrs: dirAttrs() }]);
              case "slow":
                setTimeout(() => {
                  if (n > (ctl.replies ?? 10)) sftp.status(reqid, STATUS.EOF);
                  else
                    sftp.name(
                      reqid,
                      files(100, (i) => `slow-${n}-${i}.dat`),
                    );
                }, ctl.delayMs ?? 250);
                return;
            }
            if (x.done) return sftp.status(reqid, STATUS.EOF);
            x.done = true;
            const names = fs.readdirSync(abs(x.dir)).map((name) => {
              const st = fs.statSync(join(abs(x.dir!), name));
              return { filename: name, longname: name, attrs: st.isDirectory() ? dirAttrs() : fileAttrs(st.size) };
            });
            sftp.name(reqid, names);
          });
        });
      });
    });
  };

  const listen = (port: number) =>
    new Promise<Server>((resolve, reject) => {
      const server = new Server({ hostKeys: [hostKey] }, serve);
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve(server));
    });
  let server = await listen(0);
  const port = (server.address() as { port: number }).port;
  const stop = async () => {
    for (const c of clients) c.end();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    port,
    password,
    ctl,
    stats,
    async replaceHostKey() {
      await stop();
      hostKey = newHostKey();
      server = await listen(port);
    },
    fingerprint() {
      const key = utils.parseKey(hostKey) as unknown as { getPublicSSH(): Buffer };
      return `SHA256:${createHash("sha256").update(key.getPublicSSH()).digest("base64").replace(/=+$/, "")}`;
    },
    knownHostsLine() {
      const key = utils.parseKey(hostKey) as unknown as { type: string; getPublicSSH(): Buffer };
      return `[127.0.0.1]:${port} ${key.type} ${key.getPublicSSH().toString("base64")}`;
    },
    stop,
  };
}
