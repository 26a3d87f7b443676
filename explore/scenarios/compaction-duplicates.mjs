// Compaction (src/table/table.ts: compactStripe) against two inserts of the same key: the
// duplicate check of an insert (its re-scan) stops at the first EMPTY slot, and compaction makes
// EMPTY slots where there were none. Same table as 'compaction' (four slots, every key hashing
// alike, 'a' idle at the home slot from the set-up); thread 0 sweeps, threads 1 and 2 each check
// 'b' once.
// Checked: no key with two live copies; no live key cut off from its home; 'b' admitted once at
// most (a burst of 1 on a clock that moves at most a tick or an edge: the exact model decides).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { brokenChains, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };
const START_MS = 10_000_000.25;
const TICK_MS = 1e-3;

export default {
  name: 'compaction-duplicates',
  what: 'a sweep clearing tombstones while two threads insert the same key across them',
  time: timeMoves({ startMs: START_MS, tickMs: TICK_MS, intervalMs: 60_000 }),
  // Three threads make a larger space than 'compaction': CI gives it half the usual budget (its
  // cost-1 schedules complete in it); the deep run explores it to the deep bounds.
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup(lib) {
    let now = START_MS - 100_000;
    const clock = { now: () => now };
    const rl = new lib.RateLimiter({ limit, maxKeys: 2, forceHash: 7, clock });
    if (rl.stats().capacity !== 4 || rl.stats().width !== 32) throw new Error('compaction-duplicates: the table is not the four-slot width-32 table it needs');
    if (!rl.allow('a')) throw new Error('compaction-duplicates: set-up refused a');
    now = START_MS;
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [0, 1, 2].map((t) => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    if (t === 0) ctx.call('sweep', () => rl.sweep());
    else ctx.call('b', () => rl.allow('b'));
  }),
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
