/**
 * Chinese names of a replica's states (`image_replicas.state`): `kura check` prints them and the
 * console's image detail shows them, so both say the same word for the same state.
 */
export const REPLICA_STATE_NAMES: Readonly<Record<string, string>> = { done: "已完成", pending: "等待复制", failed: "失败" };

/** The Chinese name of a replica state, or the state itself when it has none. */
export function replicaStateName(state: string): string {
  return REPLICA_STATE_NAMES[state] ?? state;
}
