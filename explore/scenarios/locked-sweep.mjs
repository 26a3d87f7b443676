// A sweep's reclaim of a sliding-log key under its lock (retireLocked in src/table/slot-lock.ts:
// tryLock, the idle check, the token turned DEAD) racing a decision on that key (underKeyLock:
// lock, ctrl check, run, settle). The key exists before the run (a probe in the set-up); the
// claim timeout is 100 ms, so a clock move lets the sweep take over a lock the decision holds, or
// the decision take over the sweep's. The sweep is thread 0: by default it runs first, and the
// depth-first search tries its races with the decision early. Checked: no lock taken over before its token was
// older than the steal age, one live copy of the key, and the admissions against an exact
// sliding log (a reclaim of a key that still logs an admission would reopen its period).
import { liveCopies } from './common.mjs';
import {
  anyTakeover, LOCKED_START_MS, lockMoves, lockTakeovers, lockWordsOf, logOutcome, slidingLogModel, slidingLogSetup, STEAL_MS, tableNames,
} from './_locks.mjs';

const limit = { permits: 1, periodMs: 1000 };

export default {
  name: 'locked-sweep',
  what: 'sweep() reclaiming a sliding-log key under its lock (tryLock, idle, DEAD) against decisions that lock, settle and relocate',
  // No one-tick move: the lock's stamps are whole ms, and the log's entries are judged a period apart.
  time: (({ startMs, moves }) => ({ startMs, moves: moves.filter((m) => m.name !== 'tick') }))(
    lockMoves({ startMs: LOCKED_START_MS, tickMs: 1e-5, stealAfterMs: STEAL_MS, periodMs: limit.periodMs })),
  mayWait: true,
  maxSteps: 3000,
  setup: slidingLogSetup(1, 2),
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k', 0); // set-up: the key is inserted, its log empty
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const lockOf = lockWordsOf(exec, lib);
    if (lockOf === null) return null; // outside the table's documented range
    return liveCopies(exec.buffers[0], lib, ['k']) ??
      lockTakeovers(exec, lib, STEAL_MS, lockOf) ??
      logOutcome(exec, slidingLogModel(limit, { slackMs: 2e-5 }), { tookOver: anyTakeover(exec, lib, lockOf) });
  },
};
