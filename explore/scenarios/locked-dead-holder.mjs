// A key lock left held by a holder that died (a worker terminated under the lock): the set-up
// inserts k with an empty sliding log and plants a token in its lock word stamped 4 s before
// the run, older than the 3 s a reclaim waits (30x the 100 ms steal age: reclaimAfterMs in
// slot-lock.ts). One thread sweeps (retireLocked: tryLock takes the dead holder's lock over, the
// idle check, DEAD); the other decides on another key, j, meanwhile.
// Checked: k is gone after the run (it was idle and its holder dead at every reading), j and k
// have one live copy each, no lock is taken over while fresh, and the admissions of j against an
// exact sliding log.
import { liveCopies } from './common.mjs';
import {
  anyTakeover, liveSlotsOf, LOCKED_START_MS, lockMoves, lockTakeovers, lockWordsOf, logOutcome, slidingLogModel, slidingLogSetup, STEAL_MS,
  tableNames,
} from './_locks.mjs';

const limit = { permits: 1, periodMs: 1000 };
const START_MS = LOCKED_START_MS;

export default {
  name: 'locked-dead-holder',
  what: 'sweep() reclaiming an idle sliding-log key whose lock a dead holder left (tryLock past the steal age), a decision on another key',
  time: lockMoves({ startMs: START_MS, tickMs: 1e-5, stealAfterMs: STEAL_MS, periodMs: limit.periodMs }),
  mayWait: true,
  maxSteps: 3000,
  setup: slidingLogSetup(1, 2),
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      // Set-up: k inserted with an empty log, then a dead holder's token in its lock word.
      rl.allow('k', 0);
      const w = new Int32Array(handle.table);
      const [base] = liveSlotsOf(handle.table, lib, 'k');
      const stamp = Math.floor(START_MS - 4000) & 0xfffff;
      Atomics.store(w, base + lib.layout.S_TAT, (stamp << 11) | (99 << 2) | 1); // owner 99, did not take over
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow j', () => rl.allow('j'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const lockOf = lockWordsOf(exec, lib);
    if (lockOf === null) return null; // outside the table's documented range
    const left = liveSlotsOf(exec.buffers[0], lib, 'k').length;
    if (left > 0) {
      const swept = exec.reports[0].calls[0]?.result;
      return `k kept its slot: idle, its lock held by a dead holder past the reclaim wait, and a sweep ran (returned ${swept})`;
    }
    return liveCopies(exec.buffers[0], lib, ['k', 'j']) ??
      lockTakeovers(exec, lib, STEAL_MS, lockOf) ??
      logOutcome(exec, slidingLogModel(limit, { slackMs: 2e-5 }), { tookOver: anyTakeover(exec, lib, lockOf) });
  },
};
