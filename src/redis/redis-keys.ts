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
