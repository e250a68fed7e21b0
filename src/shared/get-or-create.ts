/** The value under `key`, made by `make` and stored on first use (memo tables, metric children). */
export function getOrCreate<K extends object, V>(map: WeakMap<K, V>, key: K, make: () => V): V;
export function getOrCreate<K, V>(map: Map<K, V>, key: K, make: () => V): V;
export function getOrCreate<K extends object, V>(map: Map<K, V> | WeakMap<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
