import { describe, integerInRange } from '../config/check.js';
import { MAX_CLOCK_MS } from '../time/ticks.js';
import { validateLimit, type Limit } from '../config/limit.js';

/** The checked parameters of a window or log algorithm: whole permits per period. */
export interface WindowLimit {
  permits: number;
  periodMs: number;
  staleSec: number;
  /** Seconds after which every count of an idle key has expired (the rule, wherever it is needed). */
  expiredSec: number;
}

/**
 * Window and log algorithms count whole requests per period: `permits` must be an integer, and
 * `burst` does not apply (the window is the burst). Throws naming the limit.
 */
export function windowLimit(limit: Limit, name: string, maxPermits = 2 ** 30, bound?: string): WindowLimit {
  const { permits, periodMs } = validateLimit(limit, name);
  if (bound !== undefined && Number.isInteger(permits) && permits > maxPermits) {
    throw new RangeError(`${name}.permits must be at most ${maxPermits} (${bound}), got ${describe(permits)}`);
  }
  integerInRange(`${name}.permits`, permits, 1, maxPermits);
  // A window holds `permits` at once; a burst of another size would be reported but not enforced
  // (found: burst 10 on a fixed window was ignored while limiter.limit said burst 10).
  if (limit.burst !== undefined && limit.burst !== permits) {
    throw new RangeError(
      `${name}.burst applies to 'gcra' only: a window admits its permits (${describe(permits)}) at once, got burst ${describe(limit.burst)}`,
    );
  }
  // The stored window index is modulo 2^32 and compared as a signed difference: it can alias only
  // if 2^53 ms spans 2^31 windows. Then a key idle for two windows is stale (its counts are all
  // expired); else never.
  const expiredSec = Math.ceil((2 * periodMs) / 1000) + 2;
  const staleSec = periodMs * 2 ** 31 > MAX_CLOCK_MS ? Infinity : expiredSec;
  return { permits, periodMs, staleSec, expiredSec };
}
