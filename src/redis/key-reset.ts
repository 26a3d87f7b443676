import { createHash } from 'node:crypto';
import { luaSetMark } from './lua-gcra.js';
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
 * A GCRA key's reset: its reset mark (the last key: lua-gcra.ts, RESET_MARK) set to Redis's time
 * in µs, kept as long as the longest of the keys about to be deleted would have lived and of the
 * mark itself (`luaSetMark`), then those keys deleted. ARGV[1], tests only: the time instead of
 * Redis's.
 */
const MARKING_SCRIPT = `local now = ARGV[1]
if now then
  now = tonumber(now)
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local n = #KEYS - 1
${luaSetMark('KEYS[n + 1]', '{ unpack(KEYS, 1, n) }', '')}
return redis.call('DEL', unpack(KEYS, 1, n))`;
const MARKING_SHA = createHash('sha1').update(MARKING_SCRIPT).digest('hex');

/** A reset that also sets the key's reset mark (GCRA): its key, and the tests' time. */
export interface ResetMark {
  key: string;
  fixedNowUs: number | null;
}

/**
 * Deletes `keys` (one slot), and with `mark` sets the key's reset mark in the same script call;
 * resolves with how many of `keys` existed. Rejects with `RedisConfigError` for a
 * misconfiguration (an ACL without DEL or SET: redis-errors.ts), with Redis's own error for an
 * outage, and with an `Error` when Redis has not answered within `timeoutMs` (the keys may then
 * be deleted or not). `waitMs`: how long it waits, when less than `timeoutMs` is left of the
 * call's deadline (a first call's, which waited for the prefix check).
 */
export function deleteKeys(redis: RedisCommands, keys: string[], timeoutMs: number, mark: ResetMark | null = null, waitMs = timeoutMs): Promise<number> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    const error = new Error(`Redis did not answer the reset within ${timeoutMs} ms (timeoutMs): the key may or may not be reset`);
    timer = setTimeout(() => reject(error), waitMs);
  });
  const args = mark === null || mark.fixedNowUs === null ? [] : [String(mark.fixedNowUs)];
  const call = (mark === null
    ? redis.evalScript(DELETE_SHA, DELETE_SCRIPT, keys, args)
    : redis.evalScript(MARKING_SHA, MARKING_SCRIPT, [...keys, mark.key], args)).then(
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
