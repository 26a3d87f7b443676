// A SLAB directory entry left stale by a reclaim that another thread finishes (src/table/slab-directory.ts:
// find finishes a reclaim whose thread stopped past its linearisation point, and only a slot's
// next claimer clears the entry), while a sweep compacts the directory across it. Set-up: four slots,
// every key hashing alike; 'a' idle at the chain's first entry, 'c' at the second with its state
// the reclaim marker (its reclaimer stopped there). Thread 0 sweeps; thread 1 checks 'c' (it
// finishes c's reclaim, leaving c's entry stale, and inserts c again). Checked: one live copy of
// each key, every entry (stale ones too) reachable from its home, the counters, and 'c' against
// the exact model (a reclaimed key is a fresh key).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { SLAB, slabLimit as limit, slabTime } from './_compaction.mjs';
import { brokenChains, countersAgree, liveCopies, tableNames } from './common.mjs';


export default {
  name: 'slab-stale',
  what: 'a SLAB compaction while a lookup finishes a stopped reclaim (a stale entry) and inserts the key again',
  time: slabTime,
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup(lib) {
    let now = slabTime.startMs - 100_000;
    const clock = { now: () => now };
    const rl = new lib.RateLimiter({ limit, maxKeys: 2, forceHash: 7, clock, slotsPerKey: 2, ...SLAB });
    if (!rl.allow('a') || !rl.allow('c')) throw new Error('slab-stale: set-up refused a key');
    // The first view's cursor starts at slot 0: 'a' took slot 0, 'c' slot 1.
    const L = lib.layout;
    const w = new Int32Array(rl.handle.table);
    const base = L.HEADER_WORDS + w[L.H_SLOT_WORDS];
    if ((w[base + L.S_CTRL] & 3) !== L.LIVE) throw new Error('slab-stale: c is not in slot 1');
    Atomics.store(w, base + L.S_TAT, L.DEAD); // c's reclaimer stopped right after its linearisation point
    now = slabTime.startMs;
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [0, 1].map((t) => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    if (t === 0) ctx.call('sweep', () => rl.sweep());
    else ctx.call('c', () => rl.allow('c'));
  }),
  names: tableNames,
  check(exec, lib) {
    const b = exec.buffers[0];
    const bad = liveCopies(b, lib, ['a', 'c']) ?? brokenChains(b, lib) ?? countersAgree(b, lib);
    if (bad !== null) return bad;
    const outcome = (c) => (c.label === 'c' ? { key: 'c', cost: 1, admitted: c.result === true } : null);
    return linearizable(callsOf(exec), gcraModel(limit), outcome, { since: exec.startMs });
  },
};
