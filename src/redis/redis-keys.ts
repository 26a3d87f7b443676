import { createHash } from 'node:crypto';

/** User keys longer than this (in UTF-16 units) are stored by their SHA-256. */
export const MAX_PLAIN_KEY = 200;

/**
 * What every Redis key of user key `key` starts with: `prefix{key}:`; a limit's key adds its
 * algorithm's tag and its index (`prefix{key}:0`, `prefix{key}:fw:1`). The braces are a Cluster
 * hash tag, so every limit of one key lives in one slot and one script can spend them all.
 * Braces and `%` in the user key are escaped (a `}` inside would end the tag early, and two user
 * keys must never map to one Redis key); a long key is replaced by its hash.
 */
export function keyBase(prefix: string, key: string): string {
  return `${prefix}{${tagOf(key)}}:`;
}

/**
 * The default prefix of a set of limits: `sluice:` and 8 hex digits of a SHA-256 of their
 * algorithms and numbers (`parts`, one string per limit), so that limiters of different limits
 * left on their defaults never share a key's state, and limiters of the same limits (the same
 * service on many processes) always do.
 */
export function defaultPrefix(parts: readonly string[]): string {
  return `sluice:${createHash('sha256').update(parts.join(',')).digest('hex').slice(0, 8)}:`;
}

/** The default prefix of RedisPolicyLimiter: its rules change (setRules), and each pair keeps its state. */
export const POLICY_PREFIX = 'sluice:policy:';

/** The Redis key of limit `index` of the global cap (`suffix`: its algorithm's tag and index). */
export function globalKey(prefix: string, suffix: string): string {
  return `${prefix}global:${suffix}`;
}

const SPECIAL = /[%{}#]/;
const SPECIALS = /[%{}#]/g;

function tagOf(key: string): string {
  if (key.length > MAX_PLAIN_KEY) return `#${createHash('sha256').update(key).digest('hex')}`;
  // '#' starts only hashed tags: escaped too, so no plain key reads as one. Most keys have none
  // of the four characters: they are used as they are.
  if (!SPECIAL.test(key)) return key;
  return key.replace(SPECIALS, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
