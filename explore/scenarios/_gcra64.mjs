// What the width-64 one-limit scenarios share (gcra-64, key-block-64): 250 million a second,
// which does not fit 32 bits (its interval is 4 ns), so its TAT is a 64-bit word in ticks of 2 ns
// and the staleness unit is on; the clock moves on that grid; the set-up; and the check on the
// tick grid against the exact model.
import { gcraModel, linearizable } from '../models.mjs';
import { callsOnTickGrid, liveCopies, timeMoves } from './common.mjs';

export const TICK_MS = 2e-6;

/** The rate with `burst`, and the same limit in ticks of TICK_MS (one permit per 2 ticks). */
export function gcra64Limits(burst) {
  return { limit: { permits: 250_000_000, periodMs: 1000, burst }, tickLimit: { permits: 1, periodMs: 2, burst } };
}

/**
 * The clock starts on a staleness unit's edge (4,096,000 ms), so a step back by a tick reads a unit
 * behind a stamp another thread may already have raised to the start's. The 64-bit TAT cannot wrap
 * within the clock's range: no wrap move.
 */
export const gcra64Time = timeMoves({ startMs: 4_096_000, tickMs: TICK_MS, intervalMs: 4e-6 });

/** The set-up of scenario `name`: a four-key table of `limit`, which must take the 64-bit path. */
export function gcra64Setup(limit, name) {
  return (lib) => {
    const rl = new lib.RateLimiter({ limit, maxKeys: 4, hashSeed: 7 });
    if (rl.stats().width !== 64) throw new Error(`${name}: the limit no longer takes the 64-bit path`);
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  };
}

/**
 * One live copy of 'k', then the calls against the exact model on the tick grid, as the limiter
 * decides: a reading counts as the tick it names when within float noise of it (the moves' sums
 * land an ulp off a 2 ns tick: 4096000.0000079996 is the double nearest 4096000.000008), else
 * the tick below. `refusalSlackMs` is in ticks.
 */
export function gcra64Check(tickLimit, outcome, refusalSlackMs = 0) {
  return (exec, lib) => {
    const copies = liveCopies(exec.buffers[0], lib, ['k']);
    if (copies !== null) return copies;
    const { calls } = callsOnTickGrid(exec, TICK_MS);
    return linearizable(calls, gcraModel(tickLimit, { refusalSlackMs }), outcome);
  };
}
