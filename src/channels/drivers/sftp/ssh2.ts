import type * as Ssh2 from "ssh2";

let loaded: typeof Ssh2 | undefined;

/**
 * ssh2, loaded the first time an SFTP channel connects or checks a key: imported at the top, it
 * cost every start ~85 ms (a quarter of loading Kura's modules) and its memory, on the far more
 * common installs without an SFTP channel. (`require` with a literal: `bun build --compile`
 * bundles it like an import.)
 */
export function ssh2(): typeof Ssh2 {
  loaded ??= require("ssh2") as typeof Ssh2;
  return loaded;
}
