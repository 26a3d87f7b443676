// The table's compaction (src/table/compaction.ts: compactStripe, run by sweep and by a full stripe)
// against an insert whose probe chain crosses the tombstone it clears, on the width-32 one-limit
// path. The table, set-up and check are _compaction.mjs's: 'a' idle at the home slot of a
// four-slot chain. Thread 0 sweeps (reclaims 'a', then compacts: the home slot's tombstone is
// EMPTY again unless a chain crosses it); thread 1 checks 'b' twice: its insert passes 'a' (or its
// tombstone) and may claim the slot after it, one whose chain the compaction could cut. (The
// per-thread key cache does not hide a cut-off copy from the second check: the cached slot is
// found again by its ctrl word.)
import { compactionCheck, compactionSetup, compactionTime } from './_compaction.mjs';
import { tableNames } from './common.mjs';

export default {
  name: 'compaction',
  what: 'a sweep clearing tombstones (compactStripe) while inserts of one key cross them',
  time: compactionTime,
  setup: compactionSetup('compaction'),
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
  check: compactionCheck,
};
