import { BootstrapError, readBootstrap } from "./config/bootstrap";
import { parseCommandLine, USAGE } from "./cli/args";
import { wrongUserProblem } from "./cli/owner";
import { log } from "./ops/log";
import { BUILD } from "./version";

async function main(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv);
  if ("error" in parsed) {
    console.error(`${parsed.error}\n${USAGE}`);
    return 2;
  }
  if (!("args" in parsed)) {
    console.log(USAGE);
    return 0;
  }
  const { command, args } = parsed;
  // Database, master key, snapshots and local-channel files are private to the service user
  // (0600 / 0700), whatever umask the shell or the unit would otherwise give.
  process.umask(0o077);
  switch (command) {
    case "version":
      console.log(`kura ${BUILD.version}（提交 ${BUILD.commit}，构建于 ${BUILD.built_at}）`);
      return 0;
    case "selftest":
      return failSafe(command, undefined, async () => {
        await (await import("./selftest")).runSelftest();
        return 0;
      });
  }
  let boot;
  try {
    boot = readBootstrap();
  } catch (err) {
    // A KURA_* value the configuration must fix: exit 2, which the unit does not restart into
    // (RestartPreventExitStatus=2; every 2 s the same line in the journal, for good, before).
    if (err instanceof BootstrapError) {
      if (command === "serve") log.error("启动失败", { err: err.message });
      else log.error("命令失败", { command, err: err.message });
      return 2;
    }
    throw err;
  }
  if (command !== "serve") {
    const problem = wrongUserProblem(boot.dataDir, [command, ...(args.some((a) => a.startsWith("-")) ? ["--", ...args] : args)]);
    if (problem) {
      log.error(problem, { data_dir: boot.dataDir });
      return 1;
    }
  }
  return failSafe(command, boot.dataDir, async () => {
    switch (command) {
      case "serve":
        return (await import("./serve")).serve(boot);
      case "reset-password":
        return (await import("./reset-password")).resetPassword(boot, args[0]);
      case "backup":
        return (await import("./cli/backup")).backupNow(boot);
      case "check":
        return (await import("./cli/check")).checkDataDir(boot);
      default:
        return (await import("./cli/restore")).restoreFromFile(boot, args[0]!);
    }
  });
}

/**
 * Runs a command: an error it does not handle itself (a damaged database page, a file it may not
 * open, an image library that does not load) ends as one line saying what to do, with exit 1,
 * never a stack trace. The module that words the reason is loaded only then, so that `version` and
 * `help` stay light.
 */
async function failSafe(command: string, dataDir: string | undefined, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (err) {
    const reason = dataDir === undefined ? ((err as Error)?.message ?? String(err)) : (await import("./startup-errors")).describeFailure(err, dataDir);
    if (command === "serve") log.error("启动失败", { err: reason });
    else log.error("命令失败", { command, err: reason });
    return 1;
  }
}

const code = await main(process.argv.slice(2));
if (code !== -1) process.exit(code);
