import { statSync } from "node:fs";
import { userNameOf } from "../shared/passwd";

const shellWord = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`);

/**
 * Why a maintenance command (check, backup, restore, reset-password) must not run as this user, or
 * undefined. Run by another user than the data directory's owner (`sudo kura check`), it would
 * leave files that user owns (tmp/, the channel probe folder, snapshots, a staged restore), which
 * the service then cannot open or remove, and it would fail to start. Checked before anything is
 * read or written; a directory that does not exist yet (`restore` on a new machine) has no owner.
 */
export function wrongUserProblem(dataDir: string, argv: string[]): string | undefined {
  let owner: number;
  try {
    owner = statSync(dataDir).uid;
  } catch {
    return undefined;
  }
  const uid = process.geteuid?.();
  if (uid === undefined || uid === owner) return undefined;
  const name = userNameOf(owner);
  const who = `${name ? ` ${name}` : ""}（uid ${owner}）`;
  const example = `sudo -u ${name ?? `'#${owner}'`} env KURA_DATA_DIR=${shellWord(dataDir)} kura ${argv.map(shellWord).join(" ")}`;
  return `请以数据目录的属主${who}运行此命令，例如：${example}（当前以 uid ${uid} 运行：它留下的文件服务将无法打开，服务会因此无法启动）`;
}
