import { createHash } from 'node:crypto';
import type { RedisCommands } from './client.js';
import { configError } from './redis-errors.js';

/**
 * A Redis limiter's `reset`: every Redis key of one user key (its state under each of its
 * limits, all in one Cluster slot by their hash tag: redis-keys.ts) deleted by one script call.
 * The key then reads as fresh on every process. A global cap is not a key's state: it stays.
 */

const DELETE_SCRIPT = "return redis.call('DEL', unpack(KEYS))";
const DELETE_SHA = createHash('sha1').update(DELETE_SCRIPT).digest('hex');

/**
 * Deletes `keys` (one slot); resolves with how many existed. Rejects with `RedisConfigError` for a
 * misconfiguration (an ACL without DEL: redis-errors.ts), with Redis's own error for an outage,
 * and with an `Error` when Redis has not answered within `timeoutMs` (the keys may then be
 * deleted or not).
 */
export function deleteKeys(redis: RedisCommands, keys: string[], timeoutMs: number): Promise<number> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    const error = new Error(`Redis did not answer the reset within ${timeoutMs} ms (timeoutMs): the key may or may not be reset`);
    timer = setTimeout(() => reject(error), timeoutMs);
  });
  const call = redis.evalScript(DELETE_SHA, DELETE_SCRIPT, keys, []).then(
    (n) => {
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new Error(`Redis answered the reset with ${String(n)}, not a count of keys`);
      return n;
    },
    (error: unknown) => {
      throw configError(error) ?? error;
    },
  );
  return Promise.race([call, late]).finally(() => clearTimeout(timer));
}
