// Type-level tests: what the published types promise to code that uses them. The assertions are
// checked by the type checker (`npm run lint` type-checks the tests); at run time they are no-ops.
import { describe, expectTypeOf, it } from 'vitest';
import {
  coarseClock, ManualClock, perSecond, RateLimiter, RedisRateLimiter,
  type AttachOptions, type Clock, type DecisionHook, type CoarseClock, type Decision, type DecisionReason, type Limit, type LimitState,
  type AcquireOptions, type AcquireSyncOptions, type RateLimiterHandle, type RateLimiterOptions, type Reservation, type ReserveOptions,
  type RateLimiterHttpOptions,
} from '../../src/index.js';

describe('the published types', () => {
  it('Decision: the four numbers and the reason always, the per-limit states and degraded only when set', () => {
    expectTypeOf<Decision>().toEqualTypeOf<{
      allowed: boolean;
      remaining: number;
      retryAfterMs: number;
      resetAfterMs: number;
      reason: DecisionReason;
      limits?: readonly LimitState[];
      degraded?: true;
    }>();
    expectTypeOf<DecisionReason>().toEqualTypeOf<'allowed' | 'limited' | 'exceeds-burst' | 'table-full' | 'global-limit' | 'unavailable'>();
    expectTypeOf<LimitState>().toEqualTypeOf<{ remaining: number; resetAfterMs: number }>();
  });

  it('RateLimiterOptions: limit and maxKeys required, the rest optional', () => {
    expectTypeOf<RateLimiterOptions['limit']>().toEqualTypeOf<Limit | readonly Limit[]>();
    expectTypeOf<RateLimiterOptions['maxKeys']>().toEqualTypeOf<number>();
    expectTypeOf<{ limit: Limit; maxKeys: number }>().toExtend<RateLimiterOptions>();
    expectTypeOf<{ limit: Limit }>().not.toExtend<RateLimiterOptions>();
    expectTypeOf<Limit>().toEqualTypeOf<{ permits: number; periodMs: number; burst?: number }>();
    expectTypeOf<AttachOptions>().toEqualTypeOf<{ clock?: Clock; cacheSize?: number; onDecision?: DecisionHook }>();
    expectTypeOf<DecisionHook>().toEqualTypeOf<(key: string, allowed: boolean, reason: DecisionReason, cost: number) => void>();
  });

  it('the methods: allow is a boolean, tryAcquire a Decision, the Redis limiter the same Decision in a promise', () => {
    expectTypeOf<RateLimiter['allow']>().toEqualTypeOf<(key: string, cost?: number) => boolean>();
    expectTypeOf<RateLimiter['tryAcquire']>().toEqualTypeOf<(key: string, cost?: number) => Decision>();
    expectTypeOf<RateLimiter['reserve']>().toEqualTypeOf<(key: string, options?: ReserveOptions) => Reservation>();
    // One calling pattern: reserve, acquireSync and acquire take the cost in their options.
    expectTypeOf<ReserveOptions>().toEqualTypeOf<{ cost?: number; maxWaitMs?: number }>();
    expectTypeOf<AcquireSyncOptions>().toEqualTypeOf<ReserveOptions>();
    expectTypeOf<AcquireOptions>().toExtend<ReserveOptions>();
    expectTypeOf<AcquireOptions['signal']>().toEqualTypeOf<AbortSignal | undefined>();
    expectTypeOf<RedisRateLimiter['tryAcquire']>().returns.toEqualTypeOf<Promise<Decision>>();
    expectTypeOf(RateLimiter.attach).parameter(0).toEqualTypeOf<RateLimiterHandle>();
    expectTypeOf(perSecond).returns.toExtend<Limit>();
  });

  it('the clocks are Clocks', () => {
    expectTypeOf<ManualClock>().toExtend<Clock>();
    expectTypeOf(coarseClock).returns.toEqualTypeOf<CoarseClock>();
    expectTypeOf<CoarseClock>().toExtend<Clock>();
    expectTypeOf<CoarseClock['lagMs']>().toEqualTypeOf<number>();
  });

  it('the middleware takes any thenable where it awaits (a Mongoose Query, a Bluebird promise), as await does', () => {
    type Req = { ip: string };
    const thenable = <T>(v: T): PromiseLike<T> => ({ then: (ok, ko) => Promise.resolve(v).then(ok, ko) });
    expectTypeOf({ limiter: new RateLimiter({ limit: perSecond(1), maxKeys: 1 }), key: (r: Req) => thenable(r.ip), skip: () => thenable(false), cost: () => thenable(1) })
      .toExtend<RateLimiterHttpOptions<Req>>();
  });
});
