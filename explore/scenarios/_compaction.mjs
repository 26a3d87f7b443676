// What the two compaction scenarios share (compaction.mjs, compaction-duplicates.mjs): the table,
// its set-up, and the check. Four slots (maxKeys 2, one stripe), every key hashing alike
// (forceHash), so every chain starts at one home slot; the set-up admits 'a' 100 s before the run
// (idle all through it), so it sits at the home slot. The check: no key with two live copies, no
// live key cut off from its home by an EMPTY slot, the table's counters equal to its slots, and the admissions and refusals of 'b' against
// the exact model (a burst of 1: a second copy of 'b' admits twice).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { brokenChains, countersAgree, liveCopies, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };
const START_MS = 10_000_000.25;

export const compactionTime = timeMoves({ startMs: START_MS, tickMs: 1e-3, intervalMs: 60_000 });

/** The SLAB layout's option (slab-layout.ts), for compactionSetup. */
export const SLAB = { [Symbol.for('sluice.layout')]: 'slab' };

/**
 * The SLAB scenarios' limit and clock moves: one a 10 s interval, so that the clock moves of a
 * run (two in the deep mode) stay inside the table's reuse age (30 s at least), as insert-stall's
 * do. A SLAB sweep holds a claim while it clears a freed slot's entry: a run whose clock jumps
 * past the reuse age while it holds one breaks the table's one timing assumption (insert.ts,
 * REUSE_AFTER_TIMEOUTS), and the explorer found what that does (docs/testing.md).
 */
export const slabLimit = { permits: 1, periodMs: 10_000, burst: 1 };
export const slabTime = timeMoves({ startMs: START_MS, tickMs: 1e-3, intervalMs: 10_000 });

/**
 * The set-up of scenario `name`: the four-slot table with 'a' idle at the home slot (its first
 * slot and the first entry of its chain in a SLAB table, `layout`), limited by `lim`.
 */
export function compactionSetup(name, layout = {}, lim = limit) {
  return (lib) => {
    let now = START_MS - 100_000;
    const clock = { now: () => now };
    const rl = new lib.RateLimiter({ limit: lim, maxKeys: 2, forceHash: 7, clock, slotsPerKey: 2, ...layout });
    const stats = rl.stats();
    if (stats.capacity !== 4 || stats.width !== 32) throw new Error(`${name}: the table is not the four-slot width-32 table it needs`);
    if (!rl.allow('a')) throw new Error(`${name}: set-up refused a`);
    now = START_MS;
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  };
}

/** The check of the compaction scenarios (on limit `lim`): a violation, or null. */
export function compactionCheck(exec, lib, lim = limit) {
  const copies = liveCopies(exec.buffers[0], lib, ['a', 'b']);
  if (copies !== null) return copies;
  const cut = brokenChains(exec.buffers[0], lib);
  if (cut !== null) return cut;
  const counted = countersAgree(exec.buffers[0], lib);
  if (counted !== null) return counted;
  const outcome = (c) => (c.label === 'b' ? { key: 'b', cost: 1, admitted: c.result === true } : null);
  return linearizable(callsOf(exec), gcraModel(lim), outcome, { since: exec.startMs });
}
