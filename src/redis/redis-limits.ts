import type { AlgorithmName } from '../algorithms/index.js';
import { windowLimit } from '../algorithms/window-limit.js';
import { validateLimit, type Limit } from '../config/limit.js';
import { limitsScript } from './limits-script.js';
import { globalKey } from './redis-keys.js';
import type { ScriptPlan } from './script-batcher.js';

/**
 * One limit as the Redis script counts it (see limits-script.ts and lua-algorithms.ts): its
 * algorithm's id and four integer parameters.
 * - gcra: [k, T, tau, burst]: k units per microsecond, so that the emission interval T is a
 *   whole number of units; tau = burst * T.
 * - fixed window, sliding window, sliding log: [period in µs, permits, 0, 0].
 */
export interface RedisLimit {
  kind: number;
  args: readonly [number, number, number, number];
  /** The limit as the user gave it, with its burst filled in (permits for the windows). */
  limit: Readonly<Required<Limit>>;
}

/** The script's algorithm ids, in the order of `ALGORITHMS` (algorithms/index.ts). */
const KIND: Record<AlgorithmName, number> = { 'gcra': 0, 'fixed-window': 1, 'sliding-window': 2, 'sliding-log': 3 };

/**
 * The key suffix of limit `i` of `count`, after the key's base: a rule that changes algorithm
 * starts a fresh state. A GCRA state carries over any change of rate (the script converts it)
 * while the rule has as many limits (as PolicyLimiter does); a window's or a log's key holds its
 * period (a window index means nothing under another period).
 */
function suffix(l: RedisLimit, i: number, count: number): string {
  switch (l.kind) {
    case 0: return `${i}/${count}`;
    case 1: return `fw${l.args[0]}:${i}`;
    case 2: return `sw${l.args[0]}:${i}`;
    default: return `sl${l.args[0]}:${i}`;
  }
}

/** What a limit is, as `defaultPrefix` hashes it: its algorithm and its numbers. */
export function limitPart(l: RedisLimit): string {
  return `${l.kind}:${l.limit.permits}/${l.limit.periodMs}/${l.limit.burst}`;
}

/** The plan of a set of limits: their keys' suffixes and the script's arguments. */
export function scriptPlan(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[], prefix: string): ScriptPlan {
  return {
    keyLimits,
    suffixes: keyLimits.map((l, i) => suffix(l, i, keyLimits.length)),
    globalKeys: global.map((l, i) => globalKey(prefix, suffix(l, i, global.length))),
    script: limitsScript(keyLimits, global),
    globalLimits: global,
    gcra: [...keyLimits, ...global].every((l) => l.kind === KIND.gcra),
    wholeUs: [...keyLimits, ...global].every((l) => l.kind !== KIND.gcra || l.args[0] === 1),
  };
}

/** Every sum the script makes stays an exact integer below this (Lua numbers are doubles). */
const MAX_UNITS = 2 ** 52;

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The period in whole microseconds (Redis's clock counts them); RangeError naming `name` otherwise. */
function periodUs(periodMs: number, name: string): number {
  const us = Math.round(periodMs * 1000);
  if (Math.abs(us - periodMs * 1000) > 1e-6 * Math.max(1, us) || us < 1) {
    throw new RangeError(`${name}.periodMs must be a whole number of microseconds for a Redis limiter (Redis's clock counts them), got ${periodMs}`);
  }
  return us;
}

/**
 * Compiles `limit` for the Redis script under `algorithm`. Throws `TypeError`/`RangeError` naming
 * `name` for a limit the script cannot count exactly. `maxLogSize` bounds a sliding log's permits
 * (a list of that many stamps per key on Redis).
 */
export function redisLimit(algorithm: AlgorithmName, limit: Limit, name: string, maxLogSize: number): RedisLimit {
  if (algorithm !== 'gcra') {
    const { permits, periodMs } = windowLimit(limit, name, algorithm === 'sliding-log' ? maxLogSize : 2 ** 30);
    const p = periodUs(periodMs, name);
    return { kind: KIND[algorithm], args: [p, permits, 0, 0], limit: Object.freeze({ permits, periodMs, burst: permits }) };
  }
  const { permits, periodMs, burst } = validateLimit(limit, name);
  const us = periodUs(periodMs, name);
  let k: number;
  let T: number;
  if (Number.isInteger(permits)) {
    const g = gcd(us, permits);
    k = permits / g;
    T = us / g;
  } else if (Number.isInteger(us / permits)) {
    k = 1;
    T = us / permits;
  } else {
    throw new RangeError(
      `${name}.permits must be a whole number, or divide ${name}.periodMs into whole microseconds, for a Redis limiter; got ${permits} per ${periodMs} ms`,
    );
  }
  const tau = burst * T;
  // The debt and the TAT's fraction are counted in units: they must stay exact.
  if (!Number.isSafeInteger(tau) || tau > MAX_UNITS) {
    throw new RangeError(
      `${name} is too fine for a Redis limiter: burst ${burst} of ${permits} per ${periodMs} ms needs ${tau} units of 1/${k} µs, over 2^52`,
    );
  }
  return { kind: KIND.gcra, args: [k, T, tau, burst], limit: Object.freeze({ permits, periodMs, burst }) };
}
