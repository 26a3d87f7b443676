// locked-log's race, smaller, on a key the table already holds: the set-up inserts k with an
// empty log, each thread checks it once, and the clock only stays or moves past the steal age.
// So each call starts at its lookup and lock, and a search spends its depth on the locked
// decision: a holder taken over past the steal age that decides a lost race again must not write
// over the new holder's entry (fix 53b46f4). That takes three preemptions and a clock move, which
// the deep search of locked-log (whose first call also inserts the key, with more calls and clock
// moves) no longer reaches within its budget. locked-log keeps the wider race. Checked as
// locked-log.
import { lockMoves, STEAL_MS } from './_locks.mjs';
import locked from './locked-log.mjs';

const moves = lockMoves({ startMs: locked.time.startMs, tickMs: 1e-5, stealAfterMs: STEAL_MS, periodMs: 1000 });

export default {
  ...locked,
  name: 'locked-log-held',
  what: 'locked-log on a key inserted at set-up, one check per thread: lock, takeover past the steal age, a lost race decided again, settle',
  time: { startMs: moves.startMs, moves: moves.moves.filter((m) => m.name === 'stay' || m.name === 'past steal age') },
  // CI gives it 3 s of DFS (the bug is deep-only).
  bounds: { ...locked.bounds, ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k', 0); // set-up: k inserted with an empty log
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
};
