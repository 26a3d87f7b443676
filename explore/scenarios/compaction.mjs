// The table's compaction (src/table/table.ts: compactStripe, run by sweep and by a full stripe)
// against inserts whose probe chains cross the tombstones it clears, on the width-32 one-limit
// path. Every key hashes alike (forceHash), so every chain starts at one home slot; the table has
// four slots (maxKeys 2, one stripe). Set-up, on the main thread with its own clock: key 'a' is
// admitted 100 s before the run (idle all through it) and so sits at the home slot. Then thread 0
// sweeps (reclaims 'a', then compacts: the home slot's tombstone is EMPTY again unless a chain
// crosses it); thread 1 checks 'b' twice: its insert passes 'a' (or its tombstone) and may claim
// the slot after it, one whose chain the compaction could cut. (The per-thread key cache does not
// hide a cut-off copy from the second check: the cached slot is found again by its ctrl word.)
// Checked: no key with two live copies; no live key cut off from its home by an EMPTY slot; the
// admissions and refusals of 'b' against the exact model (a burst of 1: a second copy of 'b'
// admits twice).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { brokenChains, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };
const START_MS = 10_000_000.25;
const TICK_MS = 1e-3;

export default {
  name: 'compaction',
  what: 'a sweep clearing tombstones (compactStripe) while inserts of one key cross them',
  time: timeMoves({ startMs: START_MS, tickMs: TICK_MS, intervalMs: 60_000 }),
  setup(lib) {
    let now = START_MS - 100_000;
    const clock = { now: () => now };
    const rl = new lib.RateLimiter({ limit, maxKeys: 2, forceHash: 7, clock });
    const stats = rl.stats();
    if (stats.capacity !== 4 || stats.width !== 32) throw new Error('compaction: the table is not the four-slot width-32 table it needs');
    if (!rl.allow('a')) throw new Error('compaction: set-up refused a');
    now = START_MS;
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
      ctx.ready();
      ctx.call('b', () => rl.allow('b'));
      // Checked again: a copy cut off from its home would be missed, inserted a second time, and
      // admitted again.
      ctx.call('b', () => rl.allow('b'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['a', 'b']);
    if (copies !== null) return copies;
    const cut = brokenChains(exec.buffers[0], lib);
    if (cut !== null) return cut;
    const outcome = (c) => (c.label === 'b' ? { key: 'b', cost: 1, admitted: c.result === true } : null);
    return linearizable(callsOf(exec), gcraModel(limit), outcome, { since: exec.startMs });
  },
};
