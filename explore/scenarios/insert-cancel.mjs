// Two threads check one new key at once, with claimTimeoutMs 1: a claim is old enough to cancel
// after any move of the clock past a ms, so one thread's insert can be cancelled by the other's
// re-scan after its fresh state was written (a new key's first check is admitted by its insert:
// Gcra32.pendingCost) and before its publish. The cancelled thread's publish then fails, and it
// must decide on the copy that won, not answer by its own unpublished admission.
// Checked: one live copy of the key, the table's counters equal to its slots, and the admissions
// against the exact model (burst 1: of the two first checks, one passes).
import { callsOf, gcraModel, linearizable } from '../models.mjs';
import { checksOf, countersAgree, keyedOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 60_000, burst: 1 };

export default {
  name: 'insert-cancel',
  what: "a new key's insert cancelled by another thread's re-scan between its fresh state and its publish (claimTimeoutMs 1)",
  time: timeMoves({ startMs: 10_000_000.25, tickMs: 1e-3, intervalMs: 20_000 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit, maxKeys: 4, hashSeed: 7, claimTimeoutMs: 1 });
    if (rl.stats().width !== 32) throw new Error('insert-cancel: the limiter is not on the width-32 path');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [checksOf('k', [1]), checksOf('k', [1])],
  names: tableNames,
  check(exec, lib) {
    return liveCopies(exec.buffers[0], lib, ['k']) ?? countersAgree(exec.buffers[0], lib) ?? linearizable(callsOf(exec), gcraModel(limit), keyedOutcome);
  },
};
