/**
 * exiftool for the tests, one process per test process (`-stay_open`): starting Perl with
 * Image::ExifTool costs ~0.3 s of CPU, a command to a running one ~10 ms, and the metadata tests
 * ask it a hundred times. Commands run one at a time, in the order asked. One that dies (the OOM
 * killer, a crash on a hostile file) is replaced: a command it had not begun to answer is sent to
 * the new one; one it died on fails.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DIE_WITH_PARENT } from "./server";

interface Running {
  proc: Bun.Subprocess<"pipe", "pipe", "pipe">;
  out: string;
  err: string;
  /** Called after each chunk of output: resolves the command in progress once both its markers arrived. */
  wake: () => void;
}

let running: Running | undefined;
let queue: Promise<unknown> = Promise.resolve();
let commands = 0;
let scratch: string | undefined;

const exited = (proc: Bun.Subprocess) => proc.exitCode !== null || proc.signalCode !== null;

/** The running exiftool, started if there is none or the last one died. */
function live(): Running {
  if (!running || exited(running.proc)) running = start();
  return running;
}

function start(): Running {
  // Killed with this process however it ends: it does not exit at the end of its input.
  const proc = Bun.spawn([...DIE_WITH_PARENT, "exiftool", "-stay_open", "True", "-@", "-"], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  const r: Running = { proc, out: "", err: "", wake: () => {} };
  const pump = async (stream: ReadableStream<Uint8Array>, into: "out" | "err") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      r[into] += decoder.decode(chunk, { stream: true });
      r.wake();
    }
    r.wake();
  };
  void pump(proc.stdout, "out");
  void pump(proc.stderr, "err");
  // Told when it exits too: a death between two chunks of output fails the command in progress.
  void proc.exited.then(() => r.wake());
  proc.unref();
  process.once("exit", () => proc.kill("SIGKILL"));
  return r;
}

/** exiftool ended while a command waited for it; `answered`: it had printed some of that command's output. */
class ExiftoolExited extends Error {
  constructor(
    readonly answered: boolean,
    detail: string,
  ) {
    super(`exiftool exited (${detail})`);
  }
}

/** Runs one exiftool command (`args`, one per line to its argument file); its stdout and stderr. */
function command(args: string[]): Promise<{ stdout: string; stderr: string }> {
  const attempt = async () => {
    const r = live();
    const n = ++commands;
    const [outMark, errMark] = [`{ready${n}}\n`, `{done${n}}\n`];
    r.out = "";
    r.err = "";
    const finished = new Promise<void>((resolve, reject) => {
      r.wake = () => {
        if (r.out.endsWith(outMark) && r.err.endsWith(errMark)) resolve();
        else if (exited(r.proc)) reject(new ExiftoolExited(r.out !== "" || r.err !== "", `${r.proc.exitCode ?? r.proc.signalCode}: ${r.err}`));
      };
    });
    try {
      r.proc.stdin.write(`${[...args, "-echo4", `{done${n}}`, `-execute${n}`].join("\n")}\n`);
      r.proc.stdin.flush();
    } catch {
      // Its input closed: it is exiting, and `finished` says so once it has.
    }
    await finished;
    return { stdout: r.out.slice(0, -outMark.length), stderr: r.err.slice(0, -errMark.length) };
  };
  const run = async () => {
    if (args.some((a) => a.includes("\n"))) throw new Error("exiftool arguments cannot hold a line break");
    try {
      return await attempt();
    } catch (err) {
      // Died before it said anything of this command (it may have been dying already): once more on a new one.
      if (err instanceof ExiftoolExited && !err.answered) return attempt();
      throw err;
    }
  };
  const result = queue.then(run, run);
  queue = result.catch(() => {});
  return result;
}

/** A file in exiftool's scratch folder holding `bytes`. */
function scratchFile(bytes: Uint8Array, n: number): string {
  if (!scratch) {
    const dir = mkdtempSync(join(tmpdir(), "kura-exiftool-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    scratch = dir;
  }
  const path = join(scratch, `in-${n}`);
  writeFileSync(path, bytes);
  return path;
}

let files = 0;

/** exiftool's reading of `bytes`: "Group:Tag" → value, every group and every embedded image (as `exiftool -j -a -G1 -s -ee -` prints it). */
export async function exiftool(bytes: Uint8Array): Promise<Record<string, unknown>> {
  const path = scratchFile(bytes, ++files);
  try {
    const { stdout, stderr } = await command(["-j", "-a", "-G1", "-s", "-ee", path]);
    const tags: Record<string, unknown> | undefined = stdout ? JSON.parse(stdout)[0] : undefined;
    // What made `exiftool -` exit 1: a file it cannot read (its reason is in the output too).
    if (!tags || tags["ExifTool:Error"]) throw new Error(`exiftool failed: ${tags?.["ExifTool:Error"] ?? stderr}`);
    // Read from a file, exiftool also names it; from stdin (as a client's upload would be) it has no name.
    for (const key of ["SourceFile", "System:FileName", "System:Directory"]) delete tags[key];
    return tags;
  } finally {
    rmSync(path, { force: true });
  }
}

/** `bytes` with tags written by exiftool (`-Tag=value` arguments), as a camera or editor would leave them. */
export async function exiftoolWrite(bytes: Uint8Array, args: string[]): Promise<Buffer> {
  const path = scratchFile(bytes, ++files);
  const out = `${path}.out`;
  try {
    const { stderr } = await command(["-q", ...args, path, "-o", out]);
    try {
      return readFileSync(out);
    } catch {
      throw new Error(`exiftool failed: ${stderr}`);
    }
  } finally {
    rmSync(path, { force: true });
    rmSync(out, { force: true });
  }
}
