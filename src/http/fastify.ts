import { isMainThread } from 'node:worker_threads';
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import { describe, integerInRange, positiveFinite } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import type { Limit } from '../config/limit.js';
import type { PolicyLimiter, PolicyRequest } from '../policy/policy-limiter.js';
import { RateLimiter } from '../rate/rate-limiter.js';
import type { Decision } from '../rate/types.js';
import type { RedisPolicyLimiter } from '../redis/redis-policy-limiter.js';
import type { RedisRateLimiter } from '../redis/redis-rate-limiter.js';
import { asError, costFunction } from './http-inputs.js';
import { DENIED_STATUS, makeCheck, settleCheck, SKIPPED, type Checker, type Outcome, type RateLimitOptions } from './middleware.js';
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

/**
 * A route's `config.rateLimit`: false to leave the route alone, true (as if absent), or what the
 * route does differently:
 * - `cost`: what one request costs here;
 * - a limit of the route's own, spent instead of the plugin's limiter: `limiter` (a limiter made
 *   once, on the main thread, and attached by handle in each worker thread that serves the
 *   route), or, on the main thread only, `limit` or `max` with `timeWindow` (ms), from which the
 *   plugin makes one RateLimiter for the route when it is registered (`maxKeys` keys, default
 *   10,000). A worker thread that made its own would count apart from the others, so there it
 *   must be `limiter`;
 * - `key`: the route's own key (with `limiter`, `limit` or `max`).
 */
export type RouteRateLimit = boolean | {
  cost?: number | ((request: FastifyRequest) => number);
  limiter?: RateLimiter | RedisRateLimiter | PolicyLimiter | RedisPolicyLimiter;
  limit?: Limit | readonly Limit[];
  max?: number;
  timeWindow?: number;
  maxKeys?: number;
  key?: (request: FastifyRequest) => string | PolicyRequest | PromiseLike<string | PolicyRequest>;
};

const ROUTE_NAMES = ['cost', 'limiter', 'limit', 'max', 'timeWindow', 'maxKeys', 'key'];
const DEFAULT_ROUTE_MAX_KEYS = 10_000;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** sluice: false to leave this route alone, true (the default), or the route's own cost, limit or key (RouteRateLimit). */
    rateLimit?: RouteRateLimit;
  }
  interface FastifyInstance {
    /**
     * sluice: a hook that spends from the plugin's limiter, for a route's `onRequest` or
     * `preHandler` where the plugin's own hook does not run (`global: false`) or comes too early:
     * `fastify.get('/x', { preHandler: fastify.rateLimit({ cost: 5 }) }, handler)`. Refused, it
     * sets the fields and throws a `RateLimitedError`; the route's `config.rateLimit` is not read.
     * A route that places it in its own hook options is left to it by the plugin's hook (counted
     * once); one added with `addHook` is not seen so.
     */
    rateLimit(
      options?: { cost?: number | ((request: FastifyRequest) => number | PromiseLike<number>) },
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
  /**
   * Fastify's error code convention: 'SLUICE_RATE_LIMITED'; 'SLUICE_DENIED' for a key on the deny
   * list and 'SLUICE_BANNED' for a banned client (`ban`), both 403.
   */
  readonly code: 'SLUICE_RATE_LIMITED' | 'SLUICE_DENIED' | 'SLUICE_BANNED';
  readonly statusCode: number;
  /** The refusal: `retryAfterMs`, `remaining`, `reason`. */
  readonly decision: Decision;
  /**
   * What the `message` option gave for this refusal: a string (also the error's message) or an
   * object (the message is its JSON), for a `setErrorHandler` that sends it as it is.
   */
  readonly body: string | object;

  constructor(
    message: string, statusCode: number, decision: Decision, body: string | object = message,
    code: 'SLUICE_RATE_LIMITED' | 'SLUICE_DENIED' | 'SLUICE_BANNED' = 'SLUICE_RATE_LIMITED',
  ) {
    super(message);
    this.code = code;
    this.statusCode = statusCode;
    this.decision = decision;
    this.body = body;
  }
}

/**
 * Checks a route's `config.rateLimit` when the route is registered, so that a mistake fails the
 * app at startup, naming the route, instead of every request (found: `{ costs: 2 }` was ignored,
 * `true` was ignored, and `cost: -1` was accepted and answered every request with a 500). Returns
 * the limiter of the route's own limit (made here from `limit` or `max`), or null.
 */
function checkRouteConfig(value: unknown, route: string): RouteLimiter | null {
  if (value === undefined || typeof value === 'boolean') return null;
  const where = `config.rateLimit of route ${route}`;
  if (value === null || typeof value !== 'object') {
    throw new TypeError(`${where} must be false, true or { cost, limiter, limit, max, timeWindow, key }, got ${describe(value)}`);
  }
  checkNames(value, ROUTE_NAMES, where, 'route rateLimit option');
  const config = value as Exclude<RouteRateLimit, boolean> & Record<string, unknown>;
  if (config.cost !== undefined) costFunction(config.cost, `${where}.cost`);
  if (config.key !== undefined && typeof config.key !== 'function') {
    throw new TypeError(`${where}.key must be a function of the request, got ${describe(config.key)}`);
  }
  const ways = ['limiter', 'limit', 'max'].filter((n) => config[n] !== undefined);
  if (ways.length > 1) throw new TypeError(`${where} takes one of limiter, limit and max (with timeWindow), got ${ways.join(' and ')}`);
  if ((config.timeWindow !== undefined) !== (config.max !== undefined)) throw new TypeError(`${where}: max and timeWindow go together`);
  if (config.maxKeys !== undefined && config.limit === undefined && config.max === undefined) {
    throw new TypeError(`${where}.maxKeys sizes the table made from limit or max; a limiter has its own`);
  }
  if (ways.length === 0) {
    if (config.key !== undefined) throw new TypeError(`${where}.key belongs with a limit of the route's own (limiter, limit or max)`);
    return null;
  }
  if (config.limiter !== undefined) return config.limiter;
  if (!isMainThread) {
    throw new TypeError(`${where}.${ways[0] as string} would make a table in this worker thread alone, which counts apart from the ` +
      `other threads: make a RateLimiter on the main thread and pass config.rateLimit.limiter = RateLimiter.attach(handle) in each worker`);
  }
  const maxKeys = integerInRange(`${where}.maxKeys`, config.maxKeys ?? DEFAULT_ROUTE_MAX_KEYS, 1, 2 ** 22);
  if (config.max !== undefined) {
    integerInRange(`${where}.max`, config.max, 1, 2 ** 40);
    positiveFinite(`${where}.timeWindow`, config.timeWindow);
    return routeLimiter({ permits: config.max, periodMs: config.timeWindow as number }, maxKeys, where, 'max and timeWindow');
  }
  return routeLimiter(config.limit as Limit | readonly Limit[], maxKeys, where, 'limit');
}

/**
 * The RateLimiter of a route's own limit; its errors name the route and the option (`where`:
 * `config.rateLimit of route GET /x`), keeping their class (TypeError or RangeError).
 */
function routeLimiter(limit: Limit | readonly Limit[], maxKeys: number, where: string, option: string): RateLimiter {
  try {
    return new RateLimiter({ limit, maxKeys });
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    const Class = error instanceof RangeError ? RangeError : TypeError;
    // 'options.limit.permits must be ...' becomes '<where>.limit.permits must be ...'.
    const message = option === 'limit' && error.message.startsWith('options.limit')
      ? `${where}.${error.message.slice('options.'.length)}` : `${where}.${option}: ${error.message}`;
    throw new Class(message, { cause: error });
  }
}

/** The error of a request to a route whose config.rateLimit object the plugin never checked (the route came first). */
function uncheckedRoute(request: FastifyRequest): TypeError {
  return new TypeError(`config.rateLimit of route ${request.routeOptions.method} ${request.routeOptions.url} was never checked by the sluice ` +
    'plugin: the route was registered before it, so its cost, limit or key would go unread; register the plugin before the routes it covers');
}

/** Hooks made by `fastify.rateLimit()`, to the checker they spend from: a route that places one is left to it by the plugin's own hook. */
const placedHooks = new WeakMap<object, object>();

/** The route options that take hooks a route may place `fastify.rateLimit()` in. */
const PLACED_IN = ['onRequest', 'preParsing', 'preValidation', 'preHandler'] as const;

type RouteLimiter = RateLimiter | RedisRateLimiter | PolicyLimiter | RedisPolicyLimiter;

/** Routes' own costs, checked once per route config object. */
const routeCosts = new WeakMap<object, (request: FastifyRequest) => number>();

function routeCost(config: { cost?: unknown }): (request: FastifyRequest) => number {
  // Checked when the route was registered (checkRouteConfig).
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
  const pluginChecker = checker;
  // Routes with a limit of their own: their checker, made once when the route is registered.
  const routeCheckers = new WeakMap<object, Checker<FastifyRequest>>();
  // The config.rateLimit objects this plugin checked: one it never saw (a route registered before
  // it) fails its requests rather than being spent from the plugin's limiter as if absent.
  const checkedConfigs = new WeakSet<object>();
  // Marks the config of a route that places this plugin's fastify.rateLimit() itself.
  const placed = Symbol('sluice: fastify.rateLimit() placed by the route');
  // Each checked request's decision, as express-rate-limit's req.rateLimit (shadow mode's answer).
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null);
  fastify.addHook('onRoute', (route) => {
    const config = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit;
    const name = `${String(route.method)} ${route.url}`;
    const limiter = checkRouteConfig(config, name);
    if (config !== null && typeof config === 'object') checkedConfigs.add(config);
    // A route that places fastify.rateLimit() itself is counted there alone (the hook copies
    // the route's config after onRoute: the mark reaches request.routeOptions.config).
    const hooks = PLACED_IN.flatMap((h) => {
      const v: unknown = (route as unknown as Record<string, unknown>)[h];
      return v === undefined || v === null ? [] : Array.isArray(v) ? v as unknown[] : [v];
    });
    if (hooks.some((h) => typeof h === 'function' && placedHooks.get(h) === pluginChecker)) {
      (route as { config?: object }).config = { ...route.config, [placed]: true };
    }
    if (limiter === null) return;
    const own = config as { key?: unknown };
    // The plugin's options, but the route's limiter (and key, if it has one).
    const routeOptions = { ...options, limiter, ...(own.key === undefined ? {} : { key: own.key }) } as RateLimitOptions<FastifyRequest>;
    try {
      routeCheckers.set(config as object, makeCheck<FastifyRequest>(routeOptions, fastifyAddress, `sluice Fastify plugin, route ${name}`, ['global']));
    } catch (error) {
      throw new TypeError(`config.rateLimit of route ${name}: ${(error as Error).message}`, { cause: error });
    }
  });
  const answer = (
    c: Checker<FastifyRequest>, request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void, outcome: Outcome,
  ): void => {
    if (outcome.thrown !== undefined) {
      // A hook threw after an admission whose spend may come back: the reply the error gets
      // decides the give-back, as any other's.
      giveBackOnReply(reply, outcome, c.giveBackWhen);
      next(asError(outcome.thrown.error));
      return;
    }
    request.rateLimit = outcome.decision;
    setReplyFields(reply, outcome, c.stacking);
    if (outcome.allowed) {
      giveBackOnReply(reply, outcome, c.giveBackWhen);
      next();
      return;
    }
    if (outcome.denied === true) {
      next(new RateLimitedError('Forbidden', DENIED_STATUS, outcome.decision, 'Forbidden', outcome.banned === true ? 'SLUICE_BANNED' : 'SLUICE_DENIED'));
      return;
    }
    settleCheck(() => c.body(request, outcome.decision), (b) => {
      next(new RateLimitedError(typeof b.value === 'string' ? b.text.trimEnd() : b.text, c.status, outcome.decision, b.value));
    }, (e) => next(asError(e)));
  };
  const global = options.global ?? true;
  fastify.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void) => {
    let c = pluginChecker;
    settleCheck(() => {
      const config = request.routeOptions.config;
      const route = config.rateLimit;
      if (route === false || (!global && route === undefined) || (config as unknown as Record<symbol, unknown>)[placed] === true) return SKIPPED;
      if (route === undefined || route === true) return c.check(request);
      if (!checkedConfigs.has(route as object)) throw uncheckedRoute(request);
      c = routeCheckers.get(route) ?? pluginChecker;
      return c.check(request, route.cost !== undefined ? routeCost(route)(request) : undefined);
    }, (o) => (o === SKIPPED ? next() : answer(c, request, reply, next, o)), (e) => next(asError(e)));
  });
  // fastify.rateLimit(): the same check, placed by the route (the first registration's limiter).
  if (!fastify.hasDecorator('rateLimit')) {
    fastify.decorate('rateLimit', (hookOptions?: { cost?: unknown }) => {
      if (hookOptions !== undefined && (hookOptions === null || typeof hookOptions !== 'object')) {
        throw new TypeError(`fastify.rateLimit options must be an object like { cost }, got ${describe(hookOptions)}`);
      }
      checkNames(hookOptions ?? {}, ['cost'], 'options', 'fastify.rateLimit option');
      const costOf = hookOptions?.cost === undefined ? undefined : costFunction<FastifyRequest>(hookOptions.cost, 'options.cost');
      const hook = (request: FastifyRequest, reply: FastifyReply): Promise<void> => new Promise((resolve, reject) => {
        settleCheck(() => pluginChecker.check(request, costOf?.(request) as number | undefined), (o) => {
          if (o === SKIPPED) resolve();
          else answer(pluginChecker, request, reply, (error) => (error === undefined ? resolve() : reject(error)), o);
        }, (e) => reject(asError(e)));
      });
      placedHooks.set(hook, pluginChecker);
      return hook;
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
