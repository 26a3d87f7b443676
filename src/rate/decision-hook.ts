import { describe } from '../config/check.js';
import type { DecisionReason } from '../rate/types.js';

/**
 * `onDecision`: a function every limiter class calls once per decision it makes, after the
 * decision is made and counted, with what a metrics exporter needs and nothing allocated:
 * the key (a PolicyLimiter's request object), whether the request passed, why, and its cost.
 *
 * - Called for each `tryAcquire` and `allow`, and for each attempt of `acquire`; not for `get`,
 *   `reserve` or the per-key controls, which decide nothing about a request.
 * - On the thread of the instance that decided: each thread's instance has its own hook
 *   (`attach(handle, { onDecision })`), since functions do not travel in a handle.
 * - A hook that throws changes nothing: the decision stands and is returned, and the error is
 *   thrown again from a microtask, where the process (or the worker) reports it as uncaught, as
 *   Node's diagnostics_channel does with a subscriber's error.
 *
 * The Prometheus adapter (`sluice/prometheus`) is one such hook.
 */
export type DecisionHook<Key = string> = (key: Key, allowed: boolean, reason: DecisionReason, cost: number) => void;

/** Checks an `onDecision` option: a function, or absent (null). `TypeError` naming it otherwise. */
export function decisionHookOf<Key>(value: unknown, name = 'options.onDecision'): DecisionHook<Key> | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function (key, allowed, reason, cost), got ${describe(value)}`);
  return value as DecisionHook<Key>;
}

/** Calls `hook`; its error is rethrown from a microtask, never into the decision that called it. */
export function tellDecision<Key>(hook: DecisionHook<Key>, key: Key, allowed: boolean, reason: DecisionReason, cost: number): void {
  try {
    hook(key, allowed, reason, cost);
  } catch (error) {
    queueMicrotask(() => {
      throw error;
    });
  }
}
