import type { ServerResponse } from 'node:http';
import { describe } from '../config/check.js';
import { isThenable } from './http-inputs.js';
import { PolicyLimiter } from '../policy/policy-limiter.js';
import { givesBackInWindows, RateLimiter } from '../rate/rate-limiter.js';
import { once } from '../rate/once.js';
import { RedisPolicyLimiter } from '../redis/redis-policy-limiter.js';
import { givesBackInRedisWindows, RedisRateLimiter } from '../redis/redis-rate-limiter.js';

/**
 * `skipSuccessfulRequests` and `skipFailedRequests`, as express-rate-limit has them: an admitted
 * request's spend is given back once its response shows it should not have counted. A response
 * of status 400 or above failed, as does a connection closed before the response ended (aborted).
 * On GCRA the spend comes back as a reward of no more than what of it is still ahead when the
 * response ends (its slot ends at least `cost` intervals after its admission's reading: what
 * drained since stays spent, math/gcra.ts `unspentTicks`; rate-limiter.ts spendGiveBack,
 * policy-limiter.ts policyGiveBack, redis-rate-limiter.ts redisSpendGiveBack by the admission's
 * Redis time), never below a fresh key's state. Once per request, whichever of the response's
 * events come. A give-back that fails (Redis did not answer; a policy pair's rule changed to
 * another algorithm meanwhile) leaves the spend counted: the client is limited a little sooner,
 * never later. On a RateLimiter of fixed or sliding windows, shared or on Redis, the spend comes
 * back only into the windows it was counted in: a response that ends after one of them did gives
 * nothing back (rate-limiter.ts, windowGiveBack; redis-rate-limiter.ts, redisSpendGiveBack), and
 * never after a reset of the key took the spend away. On Redis an admission a lease of the local
 * tier answered keeps its spend. A shared-memory policy request gives back by the rule that
 * decided it, GCRA as above and a window into its own windows (policy-limiter.ts, policyGiveBack);
 * a sliding log keeps its spend (its reward gives back its newest stamps, which need not be the
 * spend's); a RedisPolicyLimiter gives back by the rule that decided, into its keys
 * (redis-policy-limiter.ts, redisPolicyGiveBack).
 *
 * Thread-safety: the listeners run on the response's thread, which is the limiter's.
 */

/** Which responses give their spend back: checked options. */
export interface GiveBackWhen {
  successful: boolean;
  failed: boolean;
}

export const GIVE_BACK_NAMES = ['skipSuccessfulRequests', 'skipFailedRequests'];

/**
 * The options checked (`TypeError` naming the option): null when neither is set. Either needs a
 * limiter that can give a spend back: a `RateLimiter` or `RedisRateLimiter` of GCRA limits or of
 * fixed or sliding windows (a global cap keeps its spend), or a `PolicyLimiter` or
 * `RedisPolicyLimiter` (for the requests whose rule is GCRA).
 */
export function giveBackOptions(options: { skipSuccessfulRequests?: unknown; skipFailedRequests?: unknown }, limiter: unknown): GiveBackWhen | null {
  // Absent is false; null is no boolean (`??` would take it for false).
  const successful = options.skipSuccessfulRequests === undefined ? false : options.skipSuccessfulRequests;
  const failed = options.skipFailedRequests === undefined ? false : options.skipFailedRequests;
  for (const [name, value] of [['skipSuccessfulRequests', successful], ['skipFailedRequests', failed]] as const) {
    if (typeof value !== 'boolean') throw new TypeError(`options.${name} must be a boolean, got ${describe(value)}`);
  }
  if (!successful && !failed) return null;
  const gives = (limiter instanceof RateLimiter && (limiter.algorithm === 'gcra' || givesBackInWindows(limiter))) ||
    (limiter instanceof RedisRateLimiter && (limiter.algorithm === 'gcra' || givesBackInRedisWindows(limiter))) ||
    limiter instanceof PolicyLimiter || limiter instanceof RedisPolicyLimiter;
  if (!gives) {
    throw new TypeError(`options.${successful ? 'skipSuccessfulRequests' : 'skipFailedRequests'} gives a spend back, which is built for ` +
      'a RateLimiter or RedisRateLimiter of GCRA limits or of fixed or sliding windows, and the policy limiters\' GCRA rules; ' +
      'this limiter\'s reward() gives back in the window or log it runs in, which may be a later one than the spend\'s');
  }
  return { successful: successful as boolean, failed: failed as boolean };
}

/**
 * Gives the spend back (`giveBack`) once `res` shows the request should not count under `when`:
 * on 'finish' by its status, or on a 'close' before the response ended (failed). A response that
 * ended or closed before this is called (the decision was pending meanwhile: an async key, a Redis
 * limiter) is decided at once, the same way: its events came and will not come again.
 */
export function giveBackAfter(res: ServerResponse, giveBack: () => void, when: GiveBackWhen): void {
  // writableFinished is true once end() flushed, before 'finish' is emitted; after that the
  // status is final. A response closed or destroyed without it never ended: aborted.
  if (res.writableFinished) {
    if (res.statusCode >= 400 ? when.failed : when.successful) giveBack();
    return;
  }
  if (res.closed || res.destroyed) {
    if (when.failed) giveBack();
    return;
  }
  const give = once(giveBack, undefined);
  res.once('finish', () => {
    if (res.statusCode >= 400 ? when.failed : when.successful) give();
  });
  // 'close' comes after 'finish' too: only a response that never ended is an aborted one.
  if (when.failed) res.once('close', () => {
    if (!res.writableFinished) give();
  });
}

/** Runs a give-back, synchronous or not, keeping its failure to itself (the spend then stays counted: see above). */
export function quietly(giveBack: () => unknown): () => void {
  return () => {
    let r: unknown;
    try {
      r = giveBack();
    } catch {
      return;
    }
    if (isThenable(r)) Promise.resolve(r).catch(() => {});
  };
}
