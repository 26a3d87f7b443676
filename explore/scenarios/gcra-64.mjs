// GCRA at width 64 on the one-limit path (WideGcra): 250 million a second with a burst of 2 does not
// fit 32 bits (its interval is 4 ns), so its TAT is a 64-bit word in ticks of 2 ns, and the
// staleness unit (STALE_UNIT_MS) is on. The key is new: thread 0 checks it twice, thread 1 asks for
// the whole burst at once (tryAcquire with cost 2), so the insert races too. The clock starts on
// a staleness unit's edge (4,096,000 ms), so a step back by a tick reads a unit behind a stamp
// another thread may already have raised to the start's. The 64-bit TAT cannot wrap within the
// clock's range: no wrap move.
// Checked: admissions and refusals against the exact model on the tick grid (see check), and one
// live copy of the key.
import { tableNames } from './common.mjs';
import { gcra64Check, gcra64Limits, gcra64Setup, gcra64Time } from './_gcra64.mjs';

/** Burst 2. */
const { limit, tickLimit } = gcra64Limits(2);

export default {
  name: 'gcra-64',
  what: 'WideGcra decide (snapshot, 64-bit commit, staleness unit), tryAcquire with cost, the first insert of a key',
  time: gcra64Time,
  setup: gcra64Setup(limit, 'gcra-64'),
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('tryAcquire2', () => rl.tryAcquire('k', 2).allowed);
    },
  ],
  names: tableNames,
  // Readings in ticks, the limit in ticks (an interval of 2, a burst of 2): exact, so no refusal slack either.
  check: gcra64Check(tickLimit, (c) => ({ key: 'k', cost: c.label === 'tryAcquire2' ? 2 : 1, admitted: c.result === true })),
};
