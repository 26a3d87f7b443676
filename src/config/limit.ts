import { describe, integerInRange, positiveFinite } from './check.js';
import { checkNames, namesOf } from './option-names.js';

/**
 * A rate: `permits` requests per `periodMs`, with room for `burst` at once.
 *
 * GCRA reads it as an emission interval `T = periodMs / permits` (one request may pass every T)
 * and a capacity `burst` (how many a fresh key may send at one instant; default `permits`).
 * Plain data: safe to share between threads and to send with `postMessage`.
 */
export interface Limit {
  /** How many requests are allowed per period. Positive and finite. */
  permits: number;
  /** The period in milliseconds. Positive and finite. */
  periodMs: number;
  /** The bucket capacity: requests allowed at once from a fresh key. 1 to 2^40; default `permits`. */
  burst?: number;
}

const LIMIT_FIELDS = namesOf<Limit>()(['permits', 'periodMs', 'burst']);

/** The largest burst a limit may have: 2^40 (a terabyte, with cost counted in bytes). */
export const MAX_BURST = 2 ** 40;

/** Options for the `perSecond` / `perMinute` / `perHour` builders. */
export interface LimitOptions {
  /** Bucket capacity; default: the number of permits. */
  burst?: number;
}

function build(permits: number, periodMs: number, options: LimitOptions | undefined): Limit {
  if (options !== undefined) {
    if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object like { burst }, got ${describe(options)}`);
    checkNames(options, ['burst'], 'options', 'limit option');
  }
  const limit: Limit = { permits, periodMs };
  if (options?.burst !== undefined) limit.burst = options.burst;
  validateLimit(limit);
  return limit;
}

/** `permits` requests per second. Pure; safe on any thread. */
export function perSecond(permits: number, options?: LimitOptions): Limit {
  return build(permits, 1_000, options);
}

/** `permits` requests per minute. Pure; safe on any thread. */
export function perMinute(permits: number, options?: LimitOptions): Limit {
  return build(permits, 60_000, options);
}

/** `permits` requests per hour. Pure; safe on any thread. */
export function perHour(permits: number, options?: LimitOptions): Limit {
  return build(permits, 3_600_000, options);
}

/** `permits` requests per day (86,400,000 ms). Pure; safe on any thread. */
export function perDay(permits: number, options?: LimitOptions): Limit {
  return build(permits, 86_400_000, options);
}

/**
 * Checks a limit and returns its burst (defaulted). Throws `TypeError`/`RangeError` naming the
 * field and value. Pure; safe on any thread.
 */
export function validateLimit(limit: unknown, name = 'limit'): Required<Limit> {
  if (limit === null || typeof limit !== 'object' || Array.isArray(limit)) {
    throw new TypeError(`${name} must be an object like { permits, periodMs }, got ${describe(limit)}`);
  }
  checkNames(limit, LIMIT_FIELDS, name, 'limit field');
  const { permits, periodMs, burst } = limit as Partial<Limit>;
  positiveFinite(`${name}.permits`, permits);
  positiveFinite(`${name}.periodMs`, periodMs);
  if (burst === undefined && (permits as number) > MAX_BURST) {
    throw new RangeError(`${name}.permits must be at most ${MAX_BURST} (2^40) when burst is not given (burst defaults to permits), ` +
      `got ${describe(permits)}: give a smaller burst, or fewer permits over a shorter period`);
  }
  const b = burst === undefined ? Math.max(1, Math.floor(permits as number)) : burst;
  if (typeof b !== 'number') throw new TypeError(`${name}.burst must be a number, got ${describe(b)}`);
  if (!Number.isFinite(b) || b < 1) throw new RangeError(`${name}.burst must be at least 1, got ${describe(b)}`);
  integerInRange(`${name}.burst`, b, 1, MAX_BURST);
  return { permits: permits as number, periodMs: periodMs as number, burst: b };
}
