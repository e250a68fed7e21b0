/**
 * The command line: which command, with which arguments. Everything is checked before any command
 * runs, so a mistyped flag (`kura backup --dry-run`, `kura serve --port 1`) touches nothing
 * instead of being ignored by a command that then does its full work.
 */

import { DEFAULT_DATA_DIR, DEFAULT_LISTEN } from "../config/bootstrap";

export const USAGE = `用法: kura [命令]
  serve                    运行服务（默认）
  reset-password [用户名]  为用户（默认：内置管理员，无论其现名）重设出厂默认密码，并结束其会话
  backup                   立即写入一份元数据快照（需先停止服务）
  check                    检查数据库和每个存储渠道（需先停止服务）
  restore <快照文件>       暂存快照，下次启动时换入
  version                  显示版本（也可用 --version）
  selftest                 检查图片处理（sharp、libvips）能否工作
  help                     显示本帮助（也可用 --help、-h）
常用环境变量：KURA_DATA_DIR 数据目录（默认 ${DEFAULT_DATA_DIR}）、KURA_LISTEN 监听地址（默认 ${DEFAULT_LISTEN}）、
KURA_TRUSTED_PROXIES 可信反向代理、KURA_MASTER_KEY 主密钥（默认数据目录中的 master.key）；完整列表见 README。
以 - 开头的用户名或文件名写在 -- 之后。`;

/** Positional arguments each command takes: at least `min`, at most `max`. */
const COMMANDS: Record<string, { min: number; max: number }> = {
  serve: { min: 0, max: 0 },
  "reset-password": { min: 0, max: 1 },
  backup: { min: 0, max: 0 },
  check: { min: 0, max: 0 },
  restore: { min: 1, max: 1 },
  version: { min: 0, max: 0 },
  selftest: { min: 0, max: 0 },
};

export type Parsed = { command: "help" } | { command: string; args: string[] } | { error: string };

const HELP = new Set(["help", "--help", "-h"]);

export function parseCommandLine(argv: string[]): Parsed {
  const [first = "serve", ...rest] = argv;
  const end = rest.indexOf("--");
  const options = end === -1 ? rest : rest.slice(0, end);
  if (HELP.has(first) || options.some((a) => HELP.has(a) && a !== "help")) return { command: "help" };
  const command = first === "--version" ? "version" : first;
  const spec = COMMANDS[command];
  if (!spec) return { error: `${command.startsWith("-") ? "未知选项" : "未知命令"}: ${command}` };
  const flag = options.find((a) => a.startsWith("-"));
  if (flag !== undefined) return { error: `kura ${command} 不接受选项 ${flag}` };
  const args = end === -1 ? rest : [...options, ...rest.slice(end + 1)];
  if (args.length > spec.max) return { error: `kura ${command} 的参数过多：${args.slice(spec.max).join(" ")}` };
  if (args.length < spec.min) return { error: `kura ${command} 缺少参数` };
  if (args.some((a) => a.trim() === "")) return { error: `kura ${command} 的参数不能为空` };
  return { command, args };
}
