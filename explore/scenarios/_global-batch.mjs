// What the global-batch scenarios share: a key limit and a fast global cap (10,000,000 a second,
// burst 400: batches of up to 12 permits held for 1.25 us), the limiter they make, and the check
// (only admissions judged: a batch may hold permits another thread is refused; one live copy
// per key).
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies } from './common.mjs';
import { tickEarly } from './_windows.mjs';

export const keyLimit = { permits: 1_000_000, periodMs: 1000, burst: 1000 };
export const cap = { permits: 10_000_000, periodMs: 1000, burst: 400 };
export const START_MS = 4999.75;

export function batchSetup(lib) {
  const rl = new lib.RateLimiter({ limit: keyLimit, globalLimit: cap, maxKeys: 8, hashSeed: 7 });
  return { buffers: [rl.handle.table], data: { handle: rl.handle } };
}

/** The check of `exec`: `costOf(label)` gives each call's key and cost, [key, cost]. */
export function batchCheck(exec, lib, costOf) {
  // The limits' ticks: 10 ns for the cap and the key's (readings are floored to them).
  const model = allOf(
    tickEarly(gcraModel(keyLimit), 1e-5),
    tickEarly(gcraModel(cap, { keyOf: () => 'global' }), 1e-5),
  );
  const outcome = (c) => {
    if (c.error !== null) return null;
    const [key, cost] = costOf(c.label);
    return { key, cost, admitted: c.result === true };
  };
  return liveCopies(exec.buffers[0], lib, ['a', 'b', 'x'])
    ?? linearizable(callsOf(exec), model, outcome, { since: exec.startMs, judgeRefusals: false });
}
