import { describe, integerInRange, positiveFinite } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import { PolicyLimiter } from '../policy/policy-limiter.js';
import { RateLimiter } from '../rate/rate-limiter.js';
import { RedisRateLimiter } from '../redis/redis-rate-limiter.js';
import type { Clock } from '../time/clock.js';
import type { Outcome } from './outcome.js';

/**
 * Bans, as @fastify/rate-limit's `ban` and `onBanReach`: a client refused more than `after` times
 * within `periodMs` is answered 403 Forbidden instead of its refusal, for as long as its
 * refusals keep above that pace. Only requests the limiter refuses are counted and turned into
 * 403s: an admitted request is admitted, banned or not.
 *
 * The refusals are counted by a RateLimiter of the handler's own (GCRA: `after` a period, burst
 * `after`), on the limiter's clock for a shared-memory limiter and the default clock for a Redis
 * one. It belongs to the handler, so each thread (each process) that makes a handler counts its
 * own refusals. It holds up to BAN_KEYS keys; a key it has no room for is not counted (never
 * banned: the limit itself still refuses it).
 *
 * Thread-safety: a ban belongs to its handler's thread.
 */
export interface BanOptions<Req> {
  /**
   * Answer 403 Forbidden to a client refused more than this many times within a period: a number
   * of refusals (the period is the limiter's first limit's), or `{ after, periodMs }` (required
   * with a PolicyLimiter, whose rules have periods of their own). Default: no bans.
   */
  ban?: number | { after: number; periodMs?: number };
  /** Called with each request answered 403 as banned, and its key (a PolicyLimiter's: the user). */
  onBanReach?: (req: Req, key: string) => void;
}

export const BAN_NAMES = ['ban', 'onBanReach'];

/** Keys a handler's ban counter holds. */
const BAN_KEYS = 65_536;

/** Counts a refusal of `key` and says how to answer it: the outcome itself, or a ban. */
export type Ban<Req> = (req: Req, key: string, refused: Outcome) => Outcome;

/** The ban of `options` for `limiter`, checked (TypeError/RangeError naming the option); undefined without one. */
export function banOf<Req>(options: BanOptions<Req>, limiter: unknown): Ban<Req> | undefined {
  const { ban, onBanReach } = options;
  if (onBanReach !== undefined && typeof onBanReach !== 'function') {
    throw new TypeError(`options.onBanReach must be a function (req, key), got ${describe(onBanReach)}`);
  }
  if (ban === undefined) {
    if (onBanReach !== undefined) throw new TypeError('options.onBanReach is called only with options.ban: set both');
    return undefined;
  }
  const spec = typeof ban === 'number' ? { after: ban } : ban;
  if (spec === null || typeof spec !== 'object') {
    throw new TypeError(`options.ban must be a number of refusals or { after, periodMs }, got ${describe(ban)}`);
  }
  checkNames(spec, ['after', 'periodMs'], 'options.ban', 'ban option');
  const after = integerInRange(typeof ban === 'number' ? 'options.ban' : 'options.ban.after', spec.after, 1, 1_000_000_000);
  let periodMs = spec.periodMs;
  if (periodMs === undefined) {
    if (!(limiter instanceof RateLimiter || limiter instanceof RedisRateLimiter)) {
      throw new TypeError('options.ban must be { after, periodMs } with a PolicyLimiter: its rules have periods of their own');
    }
    periodMs = (limiter.limits[0] as { periodMs: number }).periodMs;
  }
  positiveFinite('options.ban.periodMs', periodMs);
  const clock: Clock | undefined = limiter instanceof RateLimiter || limiter instanceof PolicyLimiter ? limiter.decisionClock : undefined;
  const refusals = new RateLimiter({
    limit: { permits: after, periodMs, burst: after }, maxKeys: BAN_KEYS, onFull: 'allow', ...(clock === undefined ? {} : { clock }),
  });
  return (req, key, refused) => {
    if (refusals.allow(key)) return refused;
    onBanReach?.(req, key);
    return { allowed: false, decision: refused.decision, fields: null, retryAfter: undefined, denied: true, banned: true };
  };
}
