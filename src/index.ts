/**
 * sluice: a lock-free GCRA rate limiter in a SharedArrayBuffer, shared by every worker thread.
 * This file only re-exports.
 */
export { RateLimiter } from './rate/rate-limiter.js';
export type {
  AttachOptions, Decision, DecisionReason, KeyState, LimitState, RateLimiterHandle, RateLimiterOptions, RateLimiterStats, TableGauges,
} from './rate/rate-limiter.js';
export type { DecisionHook } from './rate/decision-hook.js';
export { PolicyLimiter } from './policy/policy-limiter.js';
export type { PolicyLimiterHandle, PolicyLimiterOptions, PolicyRequest, PolicyRule } from './policy/policy-limiter.js';
export type { AlgorithmName } from './algorithms/index.js';
export { fastifyRateLimit, ipKey, rateLimit, rateLimitHeaders } from './http/index.js';
export type {
  FastifyOnRequestHook, FastifyReplyLike, FastifyRequestLike, HeaderMode, NextFunction, PolicyLimiterHttpOptions,
  RateLimitHandler, RateLimitHeaders, RateLimiterHttpOptions, RateLimitOptions, RefusalMessage,
} from './http/index.js';
export { ConcurrencyLimiter } from './concurrency/concurrency-limiter.js';
export type {
  ConcurrencyLimiterHandle, ConcurrencyLimiterOptions, ConcurrencyLimiterStats, Lease, LeaseDecision,
} from './concurrency/concurrency-limiter.js';
export { limitTasks } from './pool/limit-tasks.js';
export type { LimitTasksOptions } from './pool/limit-tasks.js';
export { RateLimitTimeoutError, TableFullError } from './errors.js';
export type { AcquireOptions, AcquireSyncOptions, Reservation, ReserveOptions } from './rate/waiting.js';
export { ManualClock, monotonicClock } from './time/clock.js';
export { coarseClock } from './time/coarse-clock.js';
export type { CoarseClock } from './time/coarse-clock.js';
export type { Clock } from './time/clock.js';
export { perDay, perHour, perMinute, perSecond } from './config/limit.js';
export type { Limit, LimitOptions } from './config/limit.js';
export { RedisRateLimiter } from './redis/redis-rate-limiter.js';
export { RedisConfigError } from './redis/redis-errors.js';
export type { RedisRateLimiterOptions } from './redis/redis-rate-limiter.js';
export { RedisPolicyLimiter } from './redis/redis-policy-limiter.js';
export type { RedisPolicyLimiterOptions } from './redis/redis-policy-limiter.js';
export type { RedisCommonOptions } from './redis/redis-core.js';
export type { RedisVerification, VerifyOptions } from './redis/verify.js';
export { LocalTier, LocalTierConfigError } from './redis/local-tier.js';
export type { LocalTierHandle, LocalTierOptions, LocalTierStats } from './redis/local-tier.js';
