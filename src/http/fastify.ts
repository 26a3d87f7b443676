import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import { describe } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import type { Decision } from '../rate/types.js';
import { asError, costFunction } from './http-inputs.js';
import { makeCheck, settleCheck, SKIPPED, type Outcome, type RateLimitOptions } from './middleware.js';
import { fastifyAddress, giveBackOnReply, setReplyFields } from './fastify-hook.js';

/**
 * `sluice/fastify`: rate limiting as a Fastify plugin. Register it once, and every route of the
 * instance (and of those registered after it, in its scope and below) spends from the limiter;
 * a route opts out, or costs more, through its `config.rateLimit`:
 *
 *   fastify.register(sluice, { limiter, key: (request) => request.headers['x-api-key'] as string })
 *   fastify.get('/export', { config: { rateLimit: { cost: 10 } } }, handler)
 *   fastify.get('/health', { config: { rateLimit: false } }, handler)
 *
 * A refusal is an error (`RateLimitedError`, statusCode 429 unless `statusCode` says otherwise)
 * passed to Fastify, so `setErrorHandler` sees it and shapes the answer; the RateLimit fields and
 * Retry-After are set on the reply first, and Fastify's default error handler keeps them. This
 * file imports Fastify's types only (`import type`): the package does not depend on Fastify.
 *
 * Thread-safety: a plugin instance uses its limiter instance, which belongs to one thread.
 */

/** A route's `config.rateLimit`: false to leave the route alone, true (as if absent), or its own cost. */
export type RouteRateLimit = boolean | { cost?: number | ((request: FastifyRequest) => number) };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** sluice: false to leave this route alone, true (the default), or the route's own cost. */
    rateLimit?: RouteRateLimit;
  }
  interface FastifyInstance {
    /**
     * sluice: a hook that spends from the plugin's limiter, for a route's `onRequest` or
     * `preHandler` where the plugin's own hook does not run (`global: false`) or comes too early:
     * `fastify.get('/x', { preHandler: fastify.rateLimit({ cost: 5 }) }, handler)`. Refused, it
     * sets the fields and throws a `RateLimitedError`; the route's `config.rateLimit` is not read.
     */
    rateLimit(
      options?: { cost?: number | ((request: FastifyRequest) => number | Promise<number>) },
    ): (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
  interface FastifyRequest {
    /** sluice: the decision of this request's check (null where the plugin left the route alone, or `skip` or `allowList` let the request through). */
    rateLimit: Decision | null;
  }
}

/**
 * The plugin's options: those of `fastifyRateLimit`, with the Fastify request, and `global`:
 * false to limit only the routes whose `config.rateLimit` is true or `{ cost }` (and those that
 * place `fastify.rateLimit()` themselves). Default true: every route but those with `false`.
 */
export type SluiceFastifyOptions = RateLimitOptions<FastifyRequest> & { global?: boolean };

/** What a refused request becomes: Fastify answers with `statusCode`, and `setErrorHandler` sees it. */
export class RateLimitedError extends Error {
  override readonly name = 'RateLimitedError';
  /** Fastify's error code convention. */
  readonly code = 'SLUICE_RATE_LIMITED';
  readonly statusCode: number;
  /** The refusal: `retryAfterMs`, `remaining`, `reason`. */
  readonly decision: Decision;
  /**
   * What the `message` option gave for this refusal: a string (also the error's message) or an
   * object (the message is its JSON), for a `setErrorHandler` that sends it as it is.
   */
  readonly body: string | object;

  constructor(message: string, statusCode: number, decision: Decision, body: string | object = message) {
    super(message);
    this.statusCode = statusCode;
    this.decision = decision;
    this.body = body;
  }
}

/**
 * Checks a route's `config.rateLimit` when the route is registered, so that a mistake fails the
 * app at startup, naming the route, instead of every request (found: `{ costs: 2 }` was ignored,
 * `true` was ignored, and `cost: -1` was accepted and answered every request with a 500).
 */
function checkRouteConfig(value: unknown, route: string): void {
  if (value === undefined || typeof value === 'boolean') return;
  const where = `config.rateLimit of route ${route}`;
  if (value === null || typeof value !== 'object') throw new TypeError(`${where} must be false, true or { cost }, got ${describe(value)}`);
  checkNames(value, ['cost'], where, 'route rateLimit option');
  const cost = (value as { cost?: unknown }).cost;
  if (cost !== undefined) costFunction(cost, `${where}.cost`);
}

/** Routes' own costs, checked once per route config object. */
const routeCosts = new WeakMap<object, (request: FastifyRequest) => number>();

function routeCost(config: { cost?: unknown }): (request: FastifyRequest) => number {
  let costOf = routeCosts.get(config);
  if (costOf === undefined) {
    costOf = costFunction<FastifyRequest>(config.cost, 'config.rateLimit.cost') as (request: FastifyRequest) => number;
    routeCosts.set(config, costOf);
  }
  return costOf;
}

const plugin: FastifyPluginCallback<SluiceFastifyOptions> = (fastify, options, done) => {
  let checker: ReturnType<typeof makeCheck<FastifyRequest>>;
  try {
    checker = makeCheck<FastifyRequest>(options, fastifyAddress, 'sluice Fastify plugin', ['global']);
    if (options.global !== undefined && typeof options.global !== 'boolean') {
      throw new TypeError(`options.global must be a boolean, got ${describe(options.global)}`);
    }
  } catch (error) {
    // Bad options fail the registration (fastify.register rejects), not the process.
    done(error as Error);
    return;
  }
  const { check, status, body, stacking, giveBackWhen } = checker;
  // Each checked request's decision, as express-rate-limit's req.rateLimit (shadow mode's answer).
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null);
  fastify.addHook('onRoute', (route) => {
    checkRouteConfig((route.config as { rateLimit?: unknown } | undefined)?.rateLimit, `${String(route.method)} ${route.url}`);
  });
  const answer = (request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void, outcome: Outcome): void => {
    request.rateLimit = outcome.decision;
    setReplyFields(reply, outcome, stacking);
    if (outcome.allowed) {
      giveBackOnReply(reply, outcome, giveBackWhen);
      next();
      return;
    }
    settleCheck(() => body(request, outcome.decision), (b) => {
      next(new RateLimitedError(typeof b.value === 'string' ? b.text.trimEnd() : b.text, status, outcome.decision, b.value));
    }, (e) => next(asError(e)));
  };
  const global = options.global ?? true;
  fastify.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void) => {
    settleCheck(() => {
      const route = request.routeOptions.config.rateLimit;
      if (route === false || (!global && route === undefined)) return SKIPPED;
      return check(request, typeof route === 'object' && route.cost !== undefined ? routeCost(route)(request) : undefined);
    }, (o) => (o === SKIPPED ? next() : answer(request, reply, next, o)), (e) => next(asError(e)));
  });
  // fastify.rateLimit(): the same check, placed by the route (the first registration's limiter).
  if (!fastify.hasDecorator('rateLimit')) {
    fastify.decorate('rateLimit', (hookOptions?: { cost?: unknown }) => {
      if (hookOptions !== undefined && (hookOptions === null || typeof hookOptions !== 'object')) {
        throw new TypeError(`fastify.rateLimit options must be an object like { cost }, got ${describe(hookOptions)}`);
      }
      checkNames(hookOptions ?? {}, ['cost'], 'options', 'fastify.rateLimit option');
      const costOf = hookOptions?.cost === undefined ? undefined : costFunction<FastifyRequest>(hookOptions.cost, 'options.cost');
      return (request: FastifyRequest, reply: FastifyReply): Promise<void> => new Promise((resolve, reject) => {
        settleCheck(() => check(request, costOf?.(request) as number | undefined), (o) => {
          if (o === SKIPPED) resolve();
          else answer(request, reply, (error) => (error === undefined ? resolve() : reject(error)), o);
        }, (e) => reject(asError(e)));
      });
    });
  }
  done();
};

// As fastify-plugin does: the hook applies to the scope that registers the plugin, not only to
// routes registered inside it. The name shows in Fastify's plugin tree and errors.
Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'sluice' });

/** The plugin: `fastify.register(sluice, { limiter, ... })`. */
export const sluice = plugin;
export default plugin;
