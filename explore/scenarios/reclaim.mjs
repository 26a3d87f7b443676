// The table's reclaim under decisions (src/table/compaction.ts: sweep; table.ts: reclaimLive, finishReclaim, the
// full stripe's #reclaimStripe) on the width-32 one-limit path. The table has two slots (maxKeys 1,
// one stripe). Set-up, on the main thread with its own clock: key 'a' is admitted 100 s before the
// run (so it is idle all through it) and key 'f' at the run's start (so it holds its slot all
// through: 1 per minute, burst 1). Then thread 0 sweeps; thread 1 probes 'a' (cost 0: its slot
// goes into the thread's key cache, nothing is spent) and then checks it; thread 2 checks 'b'
// twice, whose insert finds the stripe full and reclaims 'a' itself if nobody has yet. A decision
// on 'a' whose slot is reclaimed under it, or whose cached slot now holds 'b', must find 'a' again
// (RELOCATE).
// Checked: no key of 'a', 'b', 'f' with two live copies; the table's counters equal to its slots; the admissions and refusals of each key
// against the exact model, with the set-up's admissions (so a key admitted in the run that reads
// as fresh afterwards shows up as an over-admission). A refusal for want of a slot (table-full)
// is outside the model: with three keys and two slots it is what the table must answer.
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { checksOf, countersAgree, keyedOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };
const START_MS = 10_000_000.25;
const TICK_MS = 1e-3;
/** When the set-up admitted 'a': idle from START_MS - 40 s on. */
const A_AT_MS = START_MS - 100_000;

export default {
  name: 'reclaim',
  what: 'sweep and a full stripe reclaiming an idle key while it is decided on (RELOCATE) and its slot is reused',
  time: timeMoves({ startMs: START_MS, tickMs: TICK_MS, intervalMs: 60_000 }),
  setup(lib) {
    let now = A_AT_MS;
    const clock = { now: () => now };
    const rl = new lib.RateLimiter({ limit, maxKeys: 1, hashSeed: 7, clock });
    const stats = rl.stats();
    if (stats.capacity !== 2 || stats.width !== 32) throw new Error('reclaim: the table is not the two-slot width-32 table it needs');
    if (!rl.allow('a')) throw new Error('reclaim: set-up refused a');
    now = START_MS;
    if (!rl.allow('f')) throw new Error('reclaim: set-up refused f');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
    checksOf('a', [0, 1]),
    checksOf('b', [1, 1]),
  ],
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['a', 'b', 'f']) ?? countersAgree(exec.buffers[0], lib);
    if (copies !== null) return copies;
    const admitted = { allowed: true, reason: 'allowed', cost: 1 };
    const setupCalls = [
      { label: 'a', thread: -1, index: 0, readings: [A_AT_MS], firstStep: -3, lastStep: -3, result: admitted },
      { label: 'f', thread: -1, index: 1, readings: [START_MS], firstStep: -2, lastStep: -2, result: admitted },
    ];
    const calls = [...setupCalls, ...callsOf(exec)];
    const outcome = (c) => (c.label === 'sweep' ? null : keyedOutcome(c));
    // No refusal slack: every reading lands on a tick (of 1 us), and with a burst of 1 a slack
    // would excuse any refusal of a fresh key (its one admission ends exactly at tau).
    return linearizable(calls, gcraModel(limit), outcome);
  },
};

