// GCRA at width 64 on the one-limit path (WideGcra): 250 million a second with a burst of 2 does not
// fit 32 bits (its interval is 4 ns), so its TAT is a 64-bit word in ticks of 2 ns, and the
// staleness unit (STALE_UNIT_MS) is on. The key is new: thread 0 checks it twice, thread 1 asks for
// the whole burst at once (tryAcquire with cost 2), so the insert races too. The clock starts on
// a staleness unit's edge (4,096,000 ms), so a step back by a tick reads a unit behind a stamp
// another thread may already have raised to the start's. The 64-bit TAT cannot wrap within the
// clock's range: no wrap move.
// Checked: admissions and refusals against the exact model on the tick grid (see check), and one
// live copy of the key.
import { gcraModel, linearizable } from '../models.mjs';
import { callsOnTickGrid, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 250_000_000, periodMs: 1000, burst: 2 };
const TICK_MS = 2e-6;
/** The same limit with time in ticks of TICK_MS: one permit per 2 ticks, burst 2. */
const TICK_LIMIT = { permits: 1, periodMs: 2, burst: 2 };

export default {
  name: 'gcra-64',
  what: 'WideGcra decide (snapshot, 64-bit commit, staleness unit), tryAcquire with cost, the first insert of a key',
  time: timeMoves({ startMs: 4_096_000, tickMs: TICK_MS, intervalMs: 4e-6 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit, maxKeys: 4, hashSeed: 7 });
    if (rl.stats().width !== 64) throw new Error('gcra-64: the limit no longer takes the 64-bit path');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
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
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['k']);
    if (copies !== null) return copies;
    // The model runs on the tick grid, as the limiter does: a reading counts as the tick it names
    // when within float noise of it (the moves' sums land an ulp off a 2 ns tick: 4096000.0000079996
    // is the double nearest 4096000.000008), else the tick below. Readings in ticks, the limit in
    // ticks (an interval of 2, a burst of 2): exact, so no refusal slack either.
    const { calls } = callsOnTickGrid(exec, TICK_MS);
    const outcome = (c) => ({ key: 'k', cost: c.label === 'tryAcquire2' ? 2 : 1, admitted: c.result === true });
    return linearizable(calls, gcraModel(TICK_LIMIT), outcome);
  },
};
