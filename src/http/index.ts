/**
 * sluice/http: RateLimit header fields and HTTP middleware (node:http, Express, Fastify).
 * This file only re-exports.
 */
export { rateLimitHeaders } from './headers.js';
export type { RateLimitHeaders } from './headers.js';
export { fastifyRateLimit, rateLimit } from './middleware.js';
export type {
  FastifyOnRequestHook, FastifyReplyLike, FastifyRequestLike, NextFunction, PolicyLimiterHttpOptions,
  RateLimitHandler, RateLimiterHttpOptions, RateLimitOptions,
} from './middleware.js';
