// The SLAB layout's slot reuse (src/table/slab-directory.ts: claimSlot, clearEntry): a sweep frees
// idle 'a''s slot and clears its entry while another thread inserts 'b' (which may take that slot
// and clear the entry itself) and a third checks 'a' again (a new insert of it). Four slots,
// every key hashing alike. Checked as the compaction scenarios are: one live copy of each key,
// every entry reachable from its home, the counters, and 'a' and 'b' against the exact model.
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { compactionSetup, SLAB, slabLimit as limit, slabTime } from './_compaction.mjs';
import { brokenChains, countersAgree, liveCopies, tableNames } from './common.mjs';


export default {
  name: 'slab-reuse',
  what: 'a SLAB sweep freeing a slot while one thread inserts a new key and another the swept key again',
  time: slabTime,
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup: compactionSetup('slab-reuse', SLAB, limit),
  threads: [0, 1, 2].map((t) => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    if (t === 0) ctx.call('sweep', () => rl.sweep());
    else if (t === 1) ctx.call('b', () => rl.allow('b'));
    else ctx.call('a', () => rl.allow('a'));
  }),
  names: tableNames,
  check(exec, lib) {
    const b = exec.buffers[0];
    const bad = liveCopies(b, lib, ['a', 'b']) ?? brokenChains(b, lib) ?? countersAgree(b, lib);
    if (bad !== null) return bad;
    const outcome = (c) => (c.label === 'a' || c.label === 'b' ? { key: c.label, cost: 1, admitted: c.result === true } : null);
    // 'a' was admitted 100 s before the run: its one permit has come back long since.
    return linearizable(callsOf(exec), gcraModel(limit), outcome, { since: exec.startMs });
  },
};
