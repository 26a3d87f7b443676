/**
 * The HTTP layer's public names (RateLimit header fields, and middleware for node:http, Express
 * and Fastify's bare hook), re-exported from the package root by src/index.ts; there is no
 * `sluice/http` subpath. The Fastify plugin has its own, `sluice/fastify` (fastify.ts).
 */
export { rateLimitHeaders } from './headers.js';
export { ipKey } from './client-address.js';
export type { RateLimitHeaders } from './headers.js';
export type { HeaderMode } from './header-modes.js';
export type { RefusalMessage } from './refusal-body.js';
export { rateLimit } from './middleware.js';
export { fastifyRateLimit } from './fastify-hook.js';
export type { NextFunction, PolicyLimiterHttpOptions, RateLimitHandler, RateLimiterHttpOptions, RateLimitOptions } from './middleware.js';
export type { FastifyOnRequestHook, FastifyReplyLike, FastifyRequestLike } from './fastify-hook.js';
