import { checkCost, describe } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import { RateLimiter, type RateLimiterHandle } from '../rate/rate-limiter.js';
import { checkMaxWait } from '../rate/waiting.js';
import { RateLimitTimeoutError } from '../errors.js';

/** Options for `limitTasks`. */
export interface LimitTasksOptions<T> {
  /** The limiter's key for a task, e.g. its tenant. */
  key: (task: T) => string;
  /** The cost of a task (default 1), or a function of it. */
  cost?: number | ((task: T) => number);
  /** `'wait'` (default): wait for the tenant's turn; `'refuse'`: reject at once when over the limit. */
  mode?: 'wait' | 'refuse';
  /** With `'wait'`: the longest wait before rejecting; default Infinity. */
  maxWaitMs?: number;
}

/**
 * Wraps a piscina task function (or any worker task handler) so that each task first passes the
 * shared limiter for its key. Give the pool the limiter's handle as `workerData`, and in the
 * worker file: `export default limitTasks(workerData, runTask, { key: (t) => t.tenant })`.
 * A task over its limit waits its turn (`mode: 'wait'`) or rejects with `RateLimitTimeoutError`
 * (`mode: 'refuse'`, or a wait longer than `maxWaitMs`); the pool passes that rejection to the
 * caller of `pool.run`.
 *
 * Thread-safety: call it once per worker thread; the returned function may run concurrently.
 */
export function limitTasks<T, R>(
  limiter: RateLimiter | RateLimiterHandle,
  run: (task: T) => R | Promise<R>,
  options: LimitTasksOptions<T>,
): (task: T) => Promise<R> {
  if (typeof run !== 'function') throw new TypeError(`run must be a function, got ${describe(run)}`);
  if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object like { key }, got ${describe(options)}`);
  checkNames(options, ['key', 'cost', 'mode', 'maxWaitMs'], 'options', 'limitTasks option');
  if (typeof options.key !== 'function') throw new TypeError(`options.key must be a function of the task, got ${describe(options.key)}`);
  const mode = options.mode ?? 'wait';
  if (mode !== 'wait' && mode !== 'refuse') throw new RangeError(`options.mode must be 'wait' or 'refuse', got ${describe(mode)}`);
  // Checked here, as acquire would check it at the first task (found: maxWaitMs -1 was accepted).
  if (options.maxWaitMs !== undefined) checkMaxWait(options.maxWaitMs, 'options.maxWaitMs');
  if (options.cost !== undefined && typeof options.cost !== 'function') checkCost(options.cost, 'options.cost');
  const shared = limiter instanceof RateLimiter ? limiter : RateLimiter.attach(limiter);
  const costOf = typeof options.cost === 'function' ? options.cost : () => (options.cost as number | undefined) ?? 1;
  return async (task: T): Promise<R> => {
    const key = options.key(task);
    const cost = costOf(task);
    if (mode === 'refuse') {
      const d = shared.tryAcquire(key, cost);
      if (!d.allowed) throw new RateLimitTimeoutError(key, d.retryAfterMs, 0);
    } else {
      await shared.acquire(key, { cost, ...(options.maxWaitMs === undefined ? {} : { maxWaitMs: options.maxWaitMs }) });
    }
    return run(task);
  };
}
