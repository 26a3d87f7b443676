import { describe } from '../config/check.js';
import type { Decision } from '../rate/types.js';
import { SKIPPED, type Outcome } from './outcome.js';

/**
 * What the adapters let an application watch, and shadow mode:
 *
 * - `onExceeded(req, decision)`: every refused request, before it is answered (in shadow mode
 *   too, where it is let through);
 * - `onExceeding(req, decision)`: every admitted request, counted (as @fastify/rate-limit's);
 * - `onLimit(req, decision)`: the admitted request that leaves its key nothing (`remaining` 0:
 *   the next request of cost 1 would wait), once per such request;
 * - `shadow: true`: every request is checked and counted as usual, and every one goes on; no
 *   RateLimit field, Retry-After or 429 is sent, and `req.rateLimit` (`request.rateLimit` in
 *   Fastify) holds what the limiter decided. For trying a new limit on live traffic.
 *
 * The hooks run on the request's thread, synchronously, before the answer; what they return is
 * ignored, and an error they throw goes where the adapter's errors go (`next(error)`); after an
 * admission whose spend may come back (skipSuccessfulRequests, skipFailedRequests), the give-back
 * still watches the response, which the error path answers.
 */
export interface ObserverOptions<Req> {
  /** Check and count every request, admit every one, send no RateLimit fields. Default false. */
  shadow?: boolean;
  /** Called with each refused request and its decision, before it is answered. */
  onExceeded?: (req: Req, decision: Decision) => void;
  /** Called with each admitted request and its decision (counted; not one that `skip` or `allowList` let through). */
  onExceeding?: (req: Req, decision: Decision) => void;
  /** Called with each admitted request that leaves its key nothing (`remaining` 0). */
  onLimit?: (req: Req, decision: Decision) => void;
}

export const OBSERVER_NAMES = ['shadow', 'onExceeded', 'onExceeding', 'onLimit'];

function hook<Req>(value: unknown, name: string): ((req: Req, decision: Decision) => void) | undefined {
  if (value !== undefined && typeof value !== 'function') throw new TypeError(`options.${name} must be a function (req, decision), got ${describe(value)}`);
  return value as ((req: Req, decision: Decision) => void) | undefined;
}

/**
 * `options`' observers checked (`TypeError` naming the option), as one function an adapter runs
 * on each outcome: it calls the hooks and returns the outcome to answer (in shadow mode, an
 * admission without fields that keeps the limiter's decision). Undefined when none is set.
 */
export function observers<Req>(options: ObserverOptions<Req>): ((req: Req, o: Outcome) => Outcome) | undefined {
  const shadow = options.shadow === undefined ? false : options.shadow; // null is no boolean
  if (typeof shadow !== 'boolean') throw new TypeError(`options.shadow must be a boolean, got ${describe(shadow)}`);
  const onExceeded = hook<Req>(options.onExceeded, 'onExceeded');
  const onExceeding = hook<Req>(options.onExceeding, 'onExceeding');
  const onLimit = hook<Req>(options.onLimit, 'onLimit');
  if (!shadow && onExceeded === undefined && onExceeding === undefined && onLimit === undefined) return undefined;
  const watch = (req: Req, o: Outcome): Outcome => {
    if (!o.allowed) onExceeded?.(req, o.decision);
    else onExceeding?.(req, o.decision);
    // An admission that leaves nothing has its reset ahead; a Redis lease's admission reports
    // remaining 0 and reset 0 (what the key holds beyond the lease is not known there): not one.
    if (o.allowed && o.decision.remaining === 0 && o.decision.resetAfterMs > 0) onLimit?.(req, o.decision);
    // Counted as usual in shadow mode: a spend given back after the response still is.
    return shadow ? { allowed: true, decision: o.decision, fields: null, retryAfter: undefined, ...(o.giveBack ? { giveBack: o.giveBack } : {}) } : o;
  };
  return (req, o) => {
    if (o === SKIPPED) return o; // skip or allowList: not checked, not watched
    if (o.giveBack === undefined) return watch(req, o);
    // A hook that throws after an admission whose spend may come back: the outcome carries the
    // error, so that the adapter still hands the give-back to the response (whose answer, the
    // error's, decides it) before the error goes on.
    try {
      return watch(req, o);
    } catch (error) {
      return { ...o, thrown: { error } };
    }
  };
}
