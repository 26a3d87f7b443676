import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, integerInRange } from '../config/check.js';
import { allowListOf, costFunction, fieldName, isThenable } from './http-inputs.js';
import { clientKey } from './client-address.js';
import { checkNames } from '../config/option-names.js';
import type { Limit } from '../config/limit.js';
import { PolicyLimiter, type PolicyRequest } from '../policy/policy-limiter.js';
import { givingBackTryAcquire, RateLimiter, type Decision } from '../rate/rate-limiter.js';
import { keepRedisPolicySpends, RedisPolicyLimiter, redisPolicyGiveBack } from '../redis/redis-policy-limiter.js';
import { givingBackPolicyTryAcquire } from '../policy/policy-limiter.js';
import { keepRedisSpends, RedisRateLimiter, redisSpendGiveBack } from '../redis/redis-rate-limiter.js';
import { fieldWriter, headerMode, stacked, withDegraded, type FieldList, type HeaderMode } from './header-modes.js';
import { advertisePolicies, policyFields, retryAfterSeconds, type PolicyFields } from './headers.js';
import { observers, OBSERVER_NAMES, type ObserverOptions } from './observers.js';
import { DENIED, DENIED_BODY, DENIED_STATUS, SKIPPED, type Outcome } from './outcome.js';
import { giveBackAfter, giveBackOptions, GIVE_BACK_NAMES, quietly, type GiveBackWhen } from './give-back.js';
import { DEFAULT_MESSAGE, refusalBody, type RefusalMessage, type RefusalBody } from './refusal-body.js';
import { BAN_NAMES, banOf, type Ban, type BanOptions } from './ban.js';

export { DENIED, DENIED_BODY, DENIED_STATUS, SKIPPED, type Outcome } from './outcome.js';

/**
 * Rate limiting for HTTP servers: `rateLimit` for node:http and Express (the same `(req, res,
 * next)` signature) and `fastifyRateLimit` for a Fastify `onRequest` hook. Both share one check:
 * find the key, spend `cost` from the limiter, and answer 429 Too Many Requests with
 * `Retry-After` and a short plain-text body when refused; otherwise go on. The RateLimit fields
 * (see headers.ts) are set on every response, refused or not, unless `headers: false`. The
 * limiter is a shared-memory one (the check is synchronous) or a Redis one (the request waits for
 * its decision; nothing else changes, and `degraded` on the decision says Redis did not make it).
 *
 * Thread-safety: a handler uses its limiter instance, so it belongs to the thread that made that
 * instance (one instance per thread, as for the limiters); the limiter's state is shared with
 * every other thread attached to it.
 */

/** Express-style continuation: called with no argument to go on, or with the error that occurred. Called on the request's thread. */
export type NextFunction = (error?: unknown) => void;

/** Options shared by `rateLimit` and `fastifyRateLimit`. `Req` is the request type the functions receive. */
interface CommonOptions<Req> extends ObserverOptions<Req>, BanOptions<Req> {
  /** What one request costs: an integer >= 0, or a function of the request (it may return a promise). Default 1. */
  cost?: number | ((req: Req) => number | PromiseLike<number>);
  /**
   * Which RateLimit fields to set on every response: `true` (the default) or 'draft-11', the
   * newest draft; 'draft-8', 'draft-7' or 'draft-6' for clients that read an older one (see
   * header-modes.ts); false for none. Retry-After is always set on a refusal.
   */
  headers?: boolean | HeaderMode;
  /** Also set the legacy X-RateLimit-Limit, -Remaining and -Reset fields (reset: a Unix time in seconds). Default false. */
  legacyHeaders?: boolean;
  /**
   * A Redis limiter's decision that Redis did not make (an outage: `decision.degraded`) sets this
   * header field to "1", so that a client or a proxy can tell (`req.rateLimit.degraded` tells the
   * app). Default: none.
   */
  degradedHeader?: string;
  /**
   * Requests for which this returns true (or a promise of true) go on uncounted, without RateLimit
   * fields (health checks, trusted clients).
   */
  skip?: (req: Req) => boolean | PromiseLike<boolean>;
  /**
   * Clients never limited, by key (a `RateLimiter`'s key; a `PolicyLimiter`'s `user`): a list, or
   * a function of the request and that key (it may return a promise). Their requests go on
   * uncounted, without RateLimit fields, as `skip`'s do.
   */
  allowList?: readonly string[] | ((req: Req, key: string) => boolean | PromiseLike<boolean>);
  /**
   * Clients always refused, by key, as `allowList` names them: answered 403 Forbidden at once,
   * uncounted, without RateLimit fields or Retry-After (a key on both lists is refused). In
   * shadow mode they go on, and `onExceeded` sees them.
   */
  denyList?: readonly string[] | ((req: Req, key: string) => boolean | PromiseLike<boolean>);
  /** The status of a refusal, 400 to 599. Default 429. */
  statusCode?: number;
  /**
   * The body of a refusal: a string (sent as plain text), an object (sent as JSON), or a function
   * of the request and the decision returning either, or a promise of either. Default "Too Many
   * Requests: retry later.\n".
   */
  message?: RefusalMessage<Req>;
  /**
   * The default key groups IPv6 clients by this many leading bits of their address (a subscriber
   * usually holds a whole /64 and can take a new address from it for every request). Default
   * 64; 128 keys each address alone. IPv4 addresses (and IPv4-mapped IPv6 ones) are used as they are.
   */
  ipv6Subnet?: number;
  /**
   * Give an admitted request's spend back once its response succeeded (status below 400), as
   * express-rate-limit's option: e.g. a login route that counts only failed attempts. It gives
   * back with the limiter's `reward`: a `RateLimiter` or a `RedisRateLimiter` of GCRA limits, the
   * policy limiters for requests whose rule is GCRA; a `RateLimiter` or `RedisRateLimiter` of
   * fixed or sliding windows gives back only into the windows the request was counted in
   * (give-back.ts). Default false.
   */
  skipSuccessfulRequests?: boolean;
  /**
   * Give an admitted request's spend back once its response failed: status 400 or above, or the
   * connection closed before the response ended. The same limiters. Default false.
   */
  skipFailedRequests?: boolean;
}

/** Options for a `RateLimiter` or a `RedisRateLimiter`: `key` names the client; default: its address. Read once, when the handler is made. */
export interface RateLimiterHttpOptions<Req> extends CommonOptions<Req> {
  limiter: RateLimiter | RedisRateLimiter;
  /**
   * The key to spend from. Default: the client's address, as the framework sees it: Express's
   * `req.ip` (which follows its `trust proxy` setting), Fastify's `request.ip` (its
   * `trustProxy`), else the socket's address; IPv6 grouped by `ipv6Subnet`.
   */
  key?: (req: Req) => string | PromiseLike<string>;
}

/** Options for a `PolicyLimiter` or a `RedisPolicyLimiter`: `key` returns who is asking and what for. Read once, when the handler is made. */
export interface PolicyLimiterHttpOptions<Req> extends CommonOptions<Req> {
  limiter: PolicyLimiter | RedisPolicyLimiter;
  /** The (user, api) pair to spend from. Required. */
  key: (req: Req) => PolicyRequest | PromiseLike<PolicyRequest>;
}

/** Options for `rateLimit` and `fastifyRateLimit`; the functions in them run on the thread of the request. */
export type RateLimitOptions<Req = IncomingMessage> = RateLimiterHttpOptions<Req> | PolicyLimiterHttpOptions<Req>;

/** What `rateLimit` adds to `RateLimitOptions` for node:http and Express. */
export interface ExpressOptions<Req, Res> {
  /**
   * Answers a refusal instead of the built-in 429: called with the decision, after the RateLimit
   * fields and Retry-After are set (not when the response was answered meanwhile: see
   * `res.headersSent`); it sends the answer (or calls `next`, e.g. with an error).
   */
  handler?: (req: Req, res: Res, next: NextFunction, decision: Decision) => void;
  /** The request property that receives the decision, as express-rate-limit's `req.rateLimit` does. Default 'rateLimit'; false: none. */
  requestProperty?: string | false;
}

/** The node:http / Express handler that `rateLimit` returns; it belongs to its limiter's thread. */
export type RateLimitHandler<Req = IncomingMessage, Res = ServerResponse> = (req: Req, res: Res, next: NextFunction) => void;

/**
 * One check of a request; `cost` overrides the options' (a Fastify route's own cost). A Redis
 * limiter's check is a promise; a shared-memory limiter's is not (no promise, no extra tick).
 */
type Check<Req> = (req: Req, cost?: number) => Outcome | Promise<Outcome>;

/** The advertised policies of `limits` run by `algorithm` (default GCRA). */
function policiesOf(algorithm: string | undefined, limits: Limit | readonly Limit[]): PolicyFields {
  return policyFields(advertisePolicies(limits, (algorithm ?? 'gcra') === 'gcra'));
}

/**
 * For a PolicyLimiter: the policies of the rule a request matches, computed once per rule object
 * (`ruleFor` returns the same object until the rules change).
 */
function policyLookup(limiter: PolicyLimiter | RedisPolicyLimiter): (request: PolicyRequest) => PolicyFields {
  const cache = new WeakMap<object, PolicyFields>();
  return (request) => {
    const rule = limiter.ruleFor(request);
    let policies = cache.get(rule);
    if (policies === undefined) {
      policies = policiesOf(rule.algorithm, rule.limit);
      cache.set(rule, policies);
    }
    return policies;
  };
}

/** The options both adapters share, checked: the check (skip test included), and how a refusal is answered. */
export interface Checker<Req> {
  /**
   * Checks a request: SKIPPED when `skip` says so, else its outcome; a promise of it when the
   * limiter is a Redis one or `key`, `cost` or `skip` returned a promise. `cost` overrides the
   * options' (a Fastify route's own).
   */
  check: Check<Req>;
  status: number;
  /** The body of a refusal (a promise when `message` is an async function). */
  body: (req: Req, decision: Decision) => RefusalBody | Promise<RefusalBody>;
  /** How many of an outcome's leading fields add to an earlier limiter's (header-modes.ts). */
  stacking: number;
  /** Which responses give an admitted request's spend back (give-back.ts); null: none. */
  giveBackWhen: GiveBackWhen | null;
}

const COMMON_NAMES = [
  'limiter', 'key', 'cost', 'headers', 'legacyHeaders', 'degradedHeader', 'skip', 'allowList', 'denyList', 'statusCode', 'message', 'ipv6Subnet',
  ...OBSERVER_NAMES,
  ...GIVE_BACK_NAMES,
  ...BAN_NAMES,
];

export function makeCheck<Req>(options: RateLimitOptions<Req>, addressOf: (req: Req) => unknown, fn: string, more: readonly string[] = []): Checker<Req> {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${fn} options must be an object like { limiter }, got ${describe(options)}`);
  }
  checkNames(options, [...COMMON_NAMES, ...more], 'options', `${fn} option`);
  // The limiter first: the options that need one (skipFailedRequests, ban) read it.
  checkLimiter(options.limiter);
  const { limiter, cost = 1, headers = true, legacyHeaders = false, skip, statusCode = 429, message = DEFAULT_MESSAGE, ipv6Subnet = 64 } = options;
  if (skip !== undefined && typeof skip !== 'function') throw new TypeError(`options.skip must be a function of the request, got ${describe(skip)}`);
  integerInRange('options.statusCode', statusCode, 400, 599);
  const body = refusalBody<Req>(message);
  integerInRange('options.ipv6Subnet', ipv6Subnet, 1, 128);
  if (typeof legacyHeaders !== 'boolean') throw new TypeError(`options.legacyHeaders must be a boolean, got ${describe(legacyHeaders)}`);
  const writer = fieldWriter(headerMode(headers), legacyHeaders);
  const stacking = writer === null ? 0 : writer.stacking;
  const defaultKey = (req: Req): string => {
    const address = addressOf(req);
    if (typeof address !== 'string' || address.length === 0) {
      throw new TypeError(`the request has no client address (its connection is closed?): pass options.key to name the client`);
    }
    return clientKey(address, ipv6Subnet);
  };
  const degraded = options.degradedHeader === undefined ? null : fieldName(options.degradedHeader, 'options.degradedHeader');
  const giveBackWhen = giveBackOptions(options as { skipSuccessfulRequests?: unknown; skipFailedRequests?: unknown }, limiter);
  const decided = checkOf(options, limiter, cost, writer, degraded, defaultKey, giveBackWhen !== null, banOf<Req>(options, limiter));
  const observe = observers(options);
  const decide: Check<Req> = observe === undefined ? decided : (req, cost) => {
    const o = decided(req, cost);
    return isThenable(o) ? Promise.resolve(o).then((x) => observe(req, x)) : observe(req, o);
  };
  if (skip === undefined) return { check: decide, status: statusCode, body, stacking, giveBackWhen };
  // An async skip (a promise, or any thenable) is awaited: a promise is truthy, and read as a
  // boolean it skipped every request (found: `skip: async () => false` let 10 of 10 through at 3
  // a minute).
  const check: Check<Req> = (req, cost) => then(skip(req), (skipped) => (skipped ? SKIPPED : decide(req, cost)));
  return { check, status: statusCode, body, stacking, giveBackWhen };
}

/** `f(v)`, or `v.then(f)` when `v` is a promise (any thenable): sync values stay sync (no extra tick). */
function then<T, U>(v: T | PromiseLike<T>, f: (v: T) => U | Promise<U>): U | Promise<U> {
  return isThenable(v) ? Promise.resolve(v).then(f) : f(v);
}

function checkOf<Req>(
  options: RateLimitOptions<Req>, limiter: unknown, cost: unknown, writer: FieldList | null, degraded: string | null, defaultKey: (req: Req) => string,
  givesBack: boolean, banned: Ban<Req> | undefined,
): Check<Req> {
  const costOf = costFunction<Req>(cost, 'options.cost');
  const headers = writer !== null;
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError(`options.key must be a function of the request, got ${describe(options.key)}`);
  }

  const outcome = (decision: Decision, fields: PolicyFields | null): Outcome => ({
    allowed: decision.allowed,
    decision,
    fields: withDegraded(fields === null || writer === null ? null : writer(decision, fields), decision, degraded),
    retryAfter: decision.allowed ? undefined : retryAfterSeconds(decision),
  });
  /**
   * Whether `o` counted its request on the limiter: admitted, `n` > 0, reason 'allowed' (a full
   * table's admission counted nothing) and not degraded (onError 'local' answers from another
   * limiter, with reason 'allowed': found, its give-back was a reward on Redis, which had counted
   * nothing, and the next request past the limit passed).
   */
  const admitted = (o: Outcome, n: number): boolean => o.allowed && n > 0 && o.decision.reason === 'allowed' && o.decision.degraded !== true;
  /**
   * `o` with its give-back (`reward`, whose failure stays its own: give-back.ts) when it counted
   * the request (`admitted`) and `gives()` (a policy request's rule is GCRA). Only where the
   * options ask for give-backs: the other paths make no closure per request.
   */
  const givingBack = (o: Outcome, n: number, reward: () => unknown, gives: () => boolean = () => true): Outcome => {
    if (admitted(o, n) && gives()) o.giveBack = quietly(reward);
    return o;
  };
  /** The key and cost of `req` (either may be a promise), then `decide` on them. */
  const allowed = allowListOf<Req>(options.allowList);
  const denied = allowListOf<Req>(options.denyList, 'denyList');
  const keyed = <K>(
    keyOf: (req: Req) => K | PromiseLike<K>, decideKey: (key: K, cost: number) => Outcome | Promise<Outcome>, nameOf: (key: K) => string,
  ): Check<Req> => {
    // A key on the deny list is refused, uncounted; then one on the allow list goes on, uncounted;
    // then the check, whose refusal counts towards the key's ban. Each step is a promise only when
    // what it ran returned one: a request that meets no promise makes no closure.
    const counted = (req: Req, key: K, name: string, n: number): Outcome | Promise<Outcome> => {
      const o = decideKey(key, n);
      if (banned === undefined) return o;
      if (isThenable(o)) return Promise.resolve(o).then((x) => (x.allowed ? x : banned(req, name, x)));
      return o.allowed ? o : banned(req, name, o);
    };
    const afterDeny = (req: Req, key: K, name: string, n: number): Outcome | Promise<Outcome> => {
      if (allowed === undefined) return counted(req, key, name, n);
      const yes = allowed(req, name);
      if (isThenable(yes)) return Promise.resolve(yes).then((x) => (x ? SKIPPED : counted(req, key, name, n)));
      return yes ? SKIPPED : counted(req, key, name, n);
    };
    const decide = (req: Req, key: K, n: number): Outcome | Promise<Outcome> => {
      if (banned === undefined && allowed === undefined && denied === undefined) return decideKey(key, n);
      const name = nameOf(key);
      if (denied === undefined) return afterDeny(req, key, name, n);
      const no = denied(req, name);
      if (isThenable(no)) return Promise.resolve(no).then((x) => (x ? DENIED : afterDeny(req, key, name, n)));
      return no ? DENIED : afterDeny(req, key, name, n);
    };
    return (req, cost) => {
      const k = keyOf(req);
      let c: number | PromiseLike<number>;
      try {
        c = cost ?? costOf(req);
      } catch (error) {
        // The cost's error is the one reported: a key's rejection must not go unhandled (it
        // would end the process).
        if (isThenable(k)) Promise.resolve(k).catch(() => {});
        throw error;
      }
      if (!isThenable(k) && !isThenable(c)) return decide(req, k, c);
      return Promise.all([k, c]).then(([key, n]) => decide(req, key, n));
    };
  };
  if (limiter instanceof RateLimiter || limiter instanceof RedisRateLimiter) {
    const keyOf = (options.key as ((req: Req) => string | PromiseLike<string>) | undefined) ?? defaultKey;
    const fixed = headers ? policiesOf(limiter.algorithm, limiter.limits) : null;
    const name = (key: string): string => key;
    if (limiter instanceof RedisRateLimiter) {
      if (!givesBack) return keyed(keyOf, (key, n) => limiter.tryAcquire(key, n).then((d) => outcome(d, fixed)), name);
      // By the admission's Redis time: windows give back only into its own windows, GCRA only
      // what of its spend is still ahead.
      keepRedisSpends(limiter);
      return keyed(keyOf, (key, n) => limiter.tryAcquire(key, n).then((d) => {
        const o = outcome(d, fixed);
        const back = admitted(o, n) ? redisSpendGiveBack(limiter, d, key, n) : undefined;
        return back === undefined ? o : givingBack(o, n, back);
      }), name);
    }
    if (!givesBack) return keyed(keyOf, (key, n) => outcome(limiter.tryAcquire(key, n), fixed), name);
    // GCRA: a reward, marked with the admission; windows: only into the admission's own windows.
    // Made with the decision, before onDecision runs (givingBackTryAcquire).
    return keyed(keyOf, (key, n) => {
      const [d, back] = givingBackTryAcquire(limiter, key, n); // a give-back for an admission only
      const o = outcome(d, fixed);
      return back === undefined ? o : givingBack(o, n, back);
    }, name);
  }
  if (limiter instanceof PolicyLimiter || limiter instanceof RedisPolicyLimiter) {
    const keyOf = options.key as ((req: Req) => PolicyRequest | PromiseLike<PolicyRequest>) | undefined;
    if (keyOf === undefined) throw new TypeError('options.key is required with a PolicyLimiter: a function of the request returning { user, api }');
    const lookup = policyLookup(limiter);
    const fields = (request: PolicyRequest): PolicyFields | null => (headers ? lookup(request) : null);
    // A policy request's user names the client; a request that is not an object fails in tryAcquire.
    const user = (request: PolicyRequest): string => (request !== null && typeof request === 'object' ? String(request.user) : '');
    // The fields are those of the rule in force when the request is decided, read before it is:
    // a setRules while Redis decides (or from onDecision) must not advertise the new rule with
    // the old rule's numbers. A request ruleFor refuses is refused by tryAcquire the same way.
    if (limiter instanceof RedisPolicyLimiter) {
      if (!givesBack) {
        return keyed(keyOf, (request, n) => {
          const f = fields(request);
          return limiter.tryAcquire(request, n).then((d) => outcome(d, f));
        }, user);
      }
      // By the rule that decided (recorded with the spend: setRules may run meanwhile).
      keepRedisPolicySpends(limiter);
      return keyed(keyOf, (request, n) => {
        const f = fields(request);
        return limiter.tryAcquire(request, n).then((d) => {
          const o = outcome(d, f);
          const back = admitted(o, n) ? redisPolicyGiveBack(limiter, d, request, n) : undefined;
          return back === undefined ? o : givingBack(o, n, back);
        });
      }, user);
    }
    if (!givesBack) {
      return keyed(keyOf, (request, n) => {
        const f = fields(request);
        return outcome(limiter.tryAcquire(request, n), f);
      }, user);
    }
    // A reward bounded by the admission's reading (GCRA) or its windows, and marked with it, by the
    // rule that decided (a sliding log keeps its spend; nothing once the rules changed). Made with
    // the decision, before onDecision runs (givingBackPolicyTryAcquire).
    return keyed(keyOf, (request, n) => {
      const f = fields(request);
      const [d, back] = givingBackPolicyTryAcquire(limiter, request, n); // a give-back for an admission only
      const o = outcome(d, f);
      return back === undefined ? o : givingBack(o, n, back);
    }, user);
  }
  throw limiterError(limiter); // checked first (makeCheck)
}

function limiterError(limiter: unknown): TypeError {
  return new TypeError(`options.limiter must be a RateLimiter, a PolicyLimiter, a RedisRateLimiter or a RedisPolicyLimiter, got ${describe(limiter)}`);
}

/** `TypeError` naming options.limiter unless it is one of the four limiters. */
function checkLimiter(limiter: unknown): void {
  const known = limiter instanceof RateLimiter || limiter instanceof RedisRateLimiter || limiter instanceof PolicyLimiter ||
    limiter instanceof RedisPolicyLimiter;
  if (!known) throw limiterError(limiter);
}

/**
 * Runs `run` (one check, or a refusal's body) and hands its result to `answer`, at once for a
 * shared-memory limiter (or a plain `message`) or when a promise (any thenable) settles; an
 * error, thrown or rejected, goes to `fail`. Every adapter's handler is this and its own answer.
 * An error `answer` throws at once reaches the caller (the framework catches it); one it throws
 * after a promise goes to `fail`, where the framework would have sent it: never an unhandled
 * rejection (which ends the process).
 */
export function settleCheck<T>(run: () => T | PromiseLike<T>, answer: (o: T) => void, fail: (error: unknown) => void): void {
  let outcome: T | PromiseLike<T>;
  try {
    outcome = run();
  } catch (error) {
    fail(error);
    return;
  }
  if (isThenable(outcome)) Promise.resolve(outcome).then(answer).then(undefined, fail);
  else answer(outcome);
}

/**
 * An error for Express's `next`: as it is, unless `next` would not take it for one: a falsy value
 * is no error and 'route' or 'router' skips on, so a function of the options that throws or
 * rejects with one would let the request on uncounted. Those become a `TypeError`, with the value
 * as its cause.
 */
function expressError(error: unknown): unknown {
  if (error && error !== 'route' && error !== 'router') return error;
  return new TypeError(`rateLimit: options.key, skip, cost, allowList, denyList, message, handler or a hook threw or rejected with ${describe(error)}, ` +
    'which next() would not take for an error', { cause: error });
}

/** The node:http / Express client address: Express's `req.ip` (its trust proxy setting), else the socket's. */
function requestAddress(req: IncomingMessage & { ip?: unknown }): unknown {
  return typeof req.ip === 'string' && req.ip.length > 0 ? req.ip : req.socket?.remoteAddress;
}

/**
 * Middleware for node:http and Express: `(req, res, next) => void`. Spends `cost` from `key(req)`
 * (default: `req.socket.remoteAddress`; with a PolicyLimiter `key` is required and returns
 * `{ user, api }`). Allowed: sets the RateLimit fields (unless `headers: false`) and calls
 * `next()`. Refused: answers 429 Too Many Requests with `Retry-After` and a plain-text body, and
 * does not call `next`. An error from `key`, `cost` or the limiter goes to `next(error)` and
 * nothing is sent (a value `next` would not take for an error goes as a `TypeError`: see
 * expressError). Bad options throw `TypeError`/`RangeError` naming the option, at once.
 *
 * Thread-safety: the handler belongs to the thread of its limiter instance.
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: RateLimitOptions<Req> & ExpressOptions<Req, Res>,
): RateLimitHandler<Req, Res> {
  const { check, status, body, stacking, giveBackWhen } = makeCheck<Req>(options, requestAddress, 'rateLimit', ['handler', 'requestProperty']);
  const { handler, requestProperty = 'rateLimit' } = options;
  if (handler !== undefined && typeof handler !== 'function') {
    throw new TypeError(`options.handler must be a function (req, res, next, decision), got ${describe(handler)}`);
  }
  if (requestProperty !== false && (typeof requestProperty !== 'string' || requestProperty.length === 0)) {
    throw new TypeError(`options.requestProperty must be a property name or false, got ${describe(requestProperty)}`);
  }
  const send = (res: Res, b: RefusalBody): void => {
    if (res.headersSent) return; // answered meanwhile (a timeout, while an async message ran)
    res.statusCode = status;
    res.setHeader('content-type', b.type);
    res.setHeader('content-length', String(Buffer.byteLength(b.text)));
    res.end(b.text);
  };
  const fail = (next: NextFunction, error: unknown): void => next(expressError(error));
  const answer = (req: Req, res: Res, next: NextFunction, outcome: Outcome): void => {
    if (outcome.thrown !== undefined) {
      // A hook threw after an admission whose spend may come back: the response the error gets
      // decides the give-back, as any other's.
      if (outcome.giveBack !== undefined) giveBackAfter(res, outcome.giveBack, giveBackWhen as GiveBackWhen);
      fail(next, outcome.thrown.error);
      return;
    }
    if (requestProperty !== false) (req as unknown as Record<string, unknown>)[requestProperty] = outcome.decision;
    // Answered already by someone else while the decision was pending (a timeout middleware's
    // 503): setHeader would throw, and a second answer cannot be sent. The request was counted;
    // an admission goes on, and a refusal is not answered again (a `handler` still runs).
    const sent = res.headersSent;
    const fields = outcome.fields;
    if (fields !== null && !sent) {
      for (let i = 0; i < fields.length; i += 2) {
        const name = fields[i] as string;
        res.setHeader(name, i < 2 * stacking ? stacked(res.getHeader(name), fields[i + 1] as string) : fields[i + 1] as string);
      }
    }
    if (outcome.allowed) {
      if (outcome.giveBack !== undefined) giveBackAfter(res, outcome.giveBack, giveBackWhen as GiveBackWhen);
      next();
      return;
    }
    if (outcome.denied === true) {
      if (sent) return;
      res.statusCode = DENIED_STATUS;
      res.setHeader('content-type', 'text/plain; charset=utf-8');
      res.end(DENIED_BODY);
      return;
    }
    if (outcome.retryAfter !== undefined && !sent) res.setHeader('retry-after', outcome.retryAfter);
    if (handler !== undefined) {
      handler(req, res, next, outcome.decision);
      return;
    }
    if (sent) return;
    // The body, from `message` (an error from its function goes to next, as any other).
    settleCheck(() => body(req, outcome.decision), (b) => send(res, b), (e) => fail(next, e));
  };
  const respond = (req: Req, res: Res, next: NextFunction, o: Outcome): void => {
    if (o === SKIPPED) next();
    else answer(req, res, next, o);
  };
  return (req, res, next) => {
    // settleCheck written out: no closure per request on the path that meets no promise.
    let o: Outcome | Promise<Outcome>;
    try {
      o = check(req);
    } catch (error) {
      fail(next, error);
      return;
    }
    // After a promise, an error the answer throws (a user handler's) goes to next, as Express
    // sends it there on the synchronous path: never an unhandled rejection.
    if (isThenable(o)) Promise.resolve(o).then((x) => respond(req, res, next, x)).then(undefined, (e: unknown) => fail(next, e));
    else respond(req, res, next, o);
  };
}
