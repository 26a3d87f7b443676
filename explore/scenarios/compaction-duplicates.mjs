// Compaction (src/table/compaction.ts: compactStripe) against two inserts of the same key: the
// duplicate check of an insert (its re-scan) stops at the first EMPTY slot, and compaction makes
// EMPTY slots where there were none. The table, set-up and check are _compaction.mjs's ('a' idle
// at the home slot); thread 0 sweeps, threads 1 and 2 each check 'b' once.
import { compactionCheck, compactionSetup, compactionTime } from './_compaction.mjs';
import { tableNames } from './common.mjs';

export default {
  name: 'compaction-duplicates',
  what: 'a sweep clearing tombstones while two threads insert the same key across them',
  time: compactionTime,
  // Three threads make a larger space than 'compaction': CI gives it half the usual budget; the
  // deep run explores it to the deep bounds.
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup: compactionSetup('compaction-duplicates'),
  threads: [0, 1, 2].map((t) => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    if (t === 0) ctx.call('sweep', () => rl.sweep());
    else ctx.call('b', () => rl.allow('b'));
  }),
  names: tableNames,
  check: compactionCheck,
};
