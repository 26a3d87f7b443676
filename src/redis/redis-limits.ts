import { validateLimit, type Limit } from '../limit.js';

/** One GCRA limit in the integer units the Redis script counts in (see gcra-script.ts). */
export interface RedisGcraLimit {
  /** Units per microsecond: the emission interval is a whole number of units. */
  k: number;
  /** The emission interval, in units. */
  T: number;
  /** The tolerance, burst * T, in units. */
  tau: number;
  burst: number;
}

/** Every sum the script makes stays an exact integer below this (Lua numbers are doubles). */
const MAX_UNITS = 2 ** 52;

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * Compiles `limit` for the Redis script: its period in whole microseconds (Redis's clock counts
 * them), its interval in units of 1/k microsecond chosen so that it is whole. Throws
 * `TypeError`/`RangeError` naming `name` for a limit the script cannot count exactly.
 */
export function redisGcraLimit(limit: Limit, name: string): RedisGcraLimit {
  const { permits, periodMs, burst } = validateLimit(limit, name);
  const periodUs = Math.round(periodMs * 1000);
  if (Math.abs(periodUs - periodMs * 1000) > 1e-6 * Math.max(1, periodUs) || periodUs < 1) {
    throw new RangeError(`${name}.periodMs must be a whole number of microseconds for a RedisRateLimiter (Redis's clock counts them), got ${periodMs}`);
  }
  let k: number;
  let T: number;
  if (Number.isInteger(permits)) {
    const g = gcd(periodUs, permits);
    k = permits / g;
    T = periodUs / g;
  } else if (Number.isInteger(periodUs / permits)) {
    k = 1;
    T = periodUs / permits;
  } else {
    throw new RangeError(`${name}.permits must be a whole number, or divide ${name}.periodMs into whole microseconds, for a RedisRateLimiter; got ${permits} per ${periodMs} ms`);
  }
  const tau = burst * T;
  // The debt and the TAT's fraction are counted in units: they must stay exact.
  if (!Number.isSafeInteger(tau) || tau > MAX_UNITS) {
    throw new RangeError(`${name} is too fine for a RedisRateLimiter: burst ${burst} of ${permits} per ${periodMs} ms needs ${tau} units of 1/${k} µs, over 2^52`);
  }
  return { k, T, tau, burst };
}
