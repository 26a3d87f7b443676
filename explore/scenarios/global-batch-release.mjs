// A global cap's per-thread batch given back after another thread charged the cap
// (rate/global-batch.ts, `release`): only a batch whose slots are still the last ones charged may
// give its unused permits back; one that another charge came after keeps them spent.
// The cap (10,000,000 a second, burst 400: batches of up to 12 permits held for 1.25 us) is spent
// down to 20 permits in the set-up. Thread 0 takes a batch of 12 with a call of cost 1 (11 left
// unused), then asks for 385, more than its batch holds: that call reads the clock, then gives
// the batch's rest back, then decides on the cap itself. Thread 1 asks for 20 once, more than a
// batch, so it charges the cap's word itself. Where the clock crosses a second edge between
// thread 0's reading and its give-back, thread 1's charge lands after the batch, from its own
// later reading: a give-back then would take thread 1's charge off instead, and the cap would
// admit thread 0's 385 where only 380 remain. Only admissions are judged (a batch may hold
// permits another thread is refused). And one live copy per key.
import { tableNames, timeMoves } from './common.mjs';
import { batchCheck, batchSetup, cap, START_MS } from './_global-batch.mjs';

/** Each call's key and cost, by label. */
const CALLS = { 'spend x': ['x', 380], 'allow a': ['a', 1], 'allow a 385': ['a', 385], 'allow b 20': ['b', 20] };

export default {
  name: 'global-batch-release',
  what: "a batch's unused permits given back (release by compareExchange) racing another thread's charge of the cap",
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 / cap.permits }),
  setup: batchSetup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('spend x', () => rl.allow('x', 380)); // set-up: the cap down to 20 permits
      ctx.ready();
      ctx.call('allow a', () => rl.allow('a'));
      ctx.call('allow a 385', () => rl.allow('a', 385));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow b 20', () => rl.allow('b', 20));
    },
  ],
  names: tableNames,
  check: (exec, lib) => batchCheck(exec, lib, (label) => CALLS[label]),
};
