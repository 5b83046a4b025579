// Durable Object storage with the limits of Cloudflare's production key-value backend, which
// workerd run locally (miniflare) does not enforce: measured, a 200 000-character value and a
// 2.1 MB one are both accepted there. Production refuses a value whose V8 serialization is
// over 128 KiB (131 072 bytes; the check allows 32 bytes of V8's own tagging), more than 128
// keys in one get/put/delete, and keys over 2 KiB. `limitedStorage(ctx.storage)` wraps a
// real Durable Object's storage and throws production's RangeError for each, so the adapter
// is tested against the limit on top of workerd's real storage and transactions.
// `serializedSize` is checked against node:v8's serializer in
// tests/servers/durable-object-limits.test.mjs.

/** The documented value limit of key-value-backed Durable Objects. */
export const VALUE_LIMIT = 128 * 1024;
/** What production enforces: the limit plus V8's tagging bytes. */
const ENFORCED = VALUE_LIMIT + 32;
const MAX_KEYS = 128;
const MAX_KEY_BYTES = 2048;

const varint = (n) => (n < 1 << 7 ? 1 : n < 1 << 14 ? 2 : n < 1 << 21 ? 3 : n < 1 << 28 ? 4 : 5);

/**
 * An upper bound of the bytes V8's serializer gives `value`: exact for strings (2 header
 * bytes, a tag, the length, Latin-1 or UTF-16 payload, at most one padding byte), generous
 * for the small objects the adapter stores.
 */
export function serializedSize(value) {
  if (typeof value === "string") {
    const twoByte = /[^\u0000-\u00ff]/.test(value);
    const payload = twoByte ? 2 * value.length : value.length;
    return 3 + varint(payload) + payload + (twoByte ? 1 : 0);
  }
  return 64 + 2 * JSON.stringify(value).length;
}

function checkKey(key) {
  if (new TextEncoder().encode(key).length > MAX_KEY_BYTES)
    throw new RangeError(`Keys cannot be larger than ${MAX_KEY_BYTES} bytes.`);
}

function checkValue(value) {
  const size = serializedSize(value);
  if (size > ENFORCED)
    throw new RangeError(`Values cannot be larger than ${VALUE_LIMIT} bytes. A value of size ${size} was provided.`);
}

function checkCount(n) {
  if (n > MAX_KEYS) throw new RangeError(`Maximum number of keys is ${MAX_KEYS}. You provided ${n}.`);
}

/**
 * `storage` (a Durable Object's storage or transaction) with the production limits; `stats`
 * records the largest value written and the most keys in one call.
 */
export function limitedStorage(storage, stats = { largest: 0, mostKeys: 0, puts: 0 }) {
  const wrapped = {
    stats,
    async get(keys) {
      if (Array.isArray(keys)) checkCount(keys.length);
      return storage.get(keys);
    },
    async put(keyOrEntries, value) {
      const entries = typeof keyOrEntries === "string" ? { [keyOrEntries]: value } : keyOrEntries;
      const keys = Object.keys(entries);
      checkCount(keys.length);
      for (const k of keys) {
        checkKey(k);
        checkValue(entries[k]);
        stats.largest = Math.max(stats.largest, serializedSize(entries[k]));
      }
      stats.mostKeys = Math.max(stats.mostKeys, keys.length);
      stats.puts++;
      return storage.put(keyOrEntries, value);
    },
    async delete(keys) {
      if (Array.isArray(keys)) checkCount(keys.length);
      return storage.delete(keys);
    },
    list: (options) => storage.list(options),
  };
  if (storage.transaction)
    wrapped.transaction = (closure) => storage.transaction((txn) => closure(limitedStorage(txn, stats)));
  return wrapped;
}
