import { BootstrapError, readBootstrap } from "./config/bootstrap";
import { log } from "./ops/log";
import { BUILD } from "./version";

async function main(argv: string[]): Promise<number> {
  const [command = "serve", ...args] = argv;
  switch (command) {
    case "version":
      console.log(`kura ${BUILD.version} (commit ${BUILD.commit}, built ${BUILD.built_at})`);
      return 0;
    case "selftest": {
      const { runSelftest } = await import("./selftest");
      await runSelftest();
      return 0;
    }
    case "serve":
    case "reset-password": {
      let boot;
      try {
        boot = readBootstrap();
      } catch (err) {
        if (err instanceof BootstrapError) {
          log.error("启动失败", { err: err.message });
          return 2;
        }
        throw err;
      }
      if (command === "serve") {
        const { serve } = await import("./serve");
        return serve(boot);
      }
      const { resetPassword } = await import("./reset-password");
      return resetPassword(boot, args[0]);
    }
    default:
      console.error(`未知命令: ${command}\n用法: kura [serve | reset-password [用户名] | version | selftest]`);
      return 2;
  }
}

const code = await main(process.argv.slice(2));
if (code !== -1) process.exit(code);
