// An insert stalled between its claim and its publish while the clock moves past 30x
// claimTimeoutMs (1 ms here) but not past the table's reuse age (30 s at least: REUSE_FLOOR_MS
// in src/table/insert.ts). The table has two slots (maxKeys 1, one stripe); the set-up admits
// 'f' (1 per minute, burst 1), which holds one slot all through. Thread 0 checks 'a': its insert
// claims the other slot. Thread 1 checks 'b' twice: the stripe is full, and the only slot a new
// key could take is thread 0's claim. A move to the next second (999.75 ms) or the next interval
// edge (20 s) makes that claim old enough to cancel, but not to reuse: were 'b' to take the
// slot, thread 0, going on, would write its fresh state over 'b', which would then admit again
// (found in a kill storm at claimTimeoutMs 1, where the reuse age was 30 ms).
// Checked: no key of 'a', 'b', 'f' with two live copies; the table's counters equal to its slots;
// every key's admissions against the exact model, the set-up's included. A refusal for want of a
// slot (table-full) is outside the model: with three keys and two slots it is the right answer.
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { checksOf, countersAgree, keyedOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };
const START_MS = 10_000_000.25;

export default {
  name: 'insert-stall',
  what: 'an insert stalled past 30x claimTimeoutMs (claimTimeoutMs 1) while another key needs its slot: the slot is not reused before the reuse age',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-3, intervalMs: 20_000 }),
  setup(lib) {
    const now = START_MS;
    const rl = new lib.RateLimiter({ limit, maxKeys: 1, hashSeed: 7, clock: { now: () => now }, claimTimeoutMs: 1 });
    if (rl.stats().capacity !== 2 || rl.stats().width !== 32) throw new Error('insert-stall: the table is not the two-slot width-32 table it needs');
    if (!rl.allow('f')) throw new Error('insert-stall: set-up refused f');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [checksOf('a', [1]), checksOf('b', [1, 1])],
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['a', 'b', 'f']) ?? countersAgree(exec.buffers[0], lib);
    if (copies !== null) return copies;
    const admitted = { allowed: true, reason: 'allowed', cost: 1 };
    const calls = [{ label: 'f', thread: -1, index: 0, readings: [START_MS], firstStep: -2, lastStep: -2, result: admitted }, ...callsOf(exec)];
    return linearizable(calls, gcraModel(limit), keyedOutcome);
  },
};

