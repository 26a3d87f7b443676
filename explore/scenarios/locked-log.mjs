// The sliding log under the per-key lock (src/rate/locked-engine.ts over src/table/slot-lock.ts):
// two threads decide on one new key, the first of them twice, 2 per second, with a claim timeout
// of 100 ms, so that a clock move past the steal age lets one thread take over a lock another
// still holds (the stalled holder then finds its compareExchanges failing, or settles).
// Checked: the admissions and refusals against an exact sliding log, one live copy of the key,
// no lock taken over before its token was older than the steal age, and no log entry that dates
// an admission earlier than its first reading (a stamp written over by a holder taken over), one
// commit of the log per admission; refusals are judged only in runs without a lock takeover (a
// stalled holder may leave the log more conservative than exact, which docs/design.md accepts).
import { liveCopies } from './common.mjs';
import {
  anyTakeover, lockTakeovers, lockWordsOf, logCommits, logDominates, logOutcome, slidingLogModel, STEAL_MS, tableNames,
  twoPerSecondLog,
} from './_locks.mjs';

const limit = { permits: 2, periodMs: 1000 };

export default {
  name: 'locked-log',
  what: 'sliding-log decisions under the key lock: lock, takeover past the steal age, run, settle, unlock; the first insert',
  ...twoPerSecondLog(),
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
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
      logOutcome(exec, slidingLogModel(limit, { slackMs: 2e-5 }), { tookOver: anyTakeover(exec, lib, lockOf) }) ??
      logDominates(exec, lib, 'k', { ...limit, tickMs: 1e-5 }) ??
      logCommits(exec, lib, 'k');
  },
};
