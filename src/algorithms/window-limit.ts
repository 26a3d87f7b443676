import { integerInRange } from '../errors.js';
import { validateLimit, type Limit } from '../limit.js';

/** The checked parameters of a window or log algorithm: whole permits per period. */
export interface WindowLimit {
  permits: number;
  periodMs: number;
  staleSec: number;
}

/**
 * Window and log algorithms count whole requests per period: `permits` must be an integer, and
 * `burst` does not apply (the window is the burst). Throws naming the limit.
 */
export function windowLimit(limit: Limit, name: string, maxPermits = 2 ** 30): WindowLimit {
  const { permits, periodMs } = validateLimit(limit, name);
  integerInRange(`${name}.permits`, permits, 1, maxPermits);
  return { permits, periodMs, staleSec: Math.ceil((2 * periodMs) / 1000) + 2 };
}
