// An admission from this thread's own writes (LockFreeEngine#allowOwnTwo) whose record of the key
// is older than a reclaim of it. Thread 1 resets the key, sweeps (which reclaims it once it is
// fresh) and admits it twice, inserting it again, likely into the same slot; thread 0 admits it
// three times, its later admissions in the same second from its own writes, through a record
// that may still name the old incarnation. Two GCRA limits, three a minute first. A commit from
// a stale record must not be decided again on the key's next incarnation (found by an attack:
// the spend landed there, then was counted again on the relocated key). Checked: admissions and
// refusals against the exact model of both limits, a reset forgetting the key's spends (a sweep
// changes nothing the model sees); one live copy of the key.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

/**
 * Every reading later than the one before, by a microsecond (the tight limit's tick) at least: no
 * 'stay' and no step back. A reading repeated lets another thread rebuild the very words this
 * thread last wrote on the key's next incarnation, whose commit then lands there: the
 * conservative corner docs/testing.md lists under "Found, not yet fixed" (this scenario finds it
 * with 'stay': a phantom refusal).
 */
const moves = timeMoves({ startMs: 3999.75, tickMs: 1e-3, intervalMs: 100, backMs: [] });
const time = { ...moves, moves: moves.moves.filter((m) => m.name !== 'stay') };

const tight = { permits: 3, periodMs: 60_000, burst: 3 };
const loose = { permits: 10, periodMs: 1000, burst: 10 };

export default {
  name: 'own-write-reclaim',
  what: "an admission from the thread's own writes on two limits, its record older than a reset, a sweep and an insert of its key by another thread (LockFreeEngine#allowOwnTwo)",
  time,
  // As the other own-write scenarios (_own.mjs): a quarter of the usual CI budget.
  bounds: { ci: { dfsBudgetMs: 2_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [tight, loose], maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow k', () => rl.allow('k'));
      ctx.call('allow k', () => rl.allow('k'));
      ctx.call('allow k', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset k', () => rl.reset('k'));
      ctx.call('sweep', () => rl.sweep());
      ctx.call('allow k', () => rl.allow('k'));
      ctx.call('allow k', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    // Each GCRA limit floors readings to its own tick: 1 us at three a minute, 10 ns at ten a second.
    const model = allOf(
      tickEarly(gcraModel(tight, { refusalSlackMs: 1e-3 }), 1e-3),
      tickEarly(gcraModel(loose, { refusalSlackMs: 1e-5 }), 1e-5),
    );
    const outcome = (c) => {
      if (c.error !== null || c.label === 'sweep') return null;
      // A reset that found nothing owed (false; an absent key reads no clock) changes nothing.
      if (c.label === 'reset k') return c.result === true ? { key: 'k', cost: 0, op: 'reset', admitted: true } : null;
      return { key: 'k', cost: 1, admitted: c.result === true };
    };
    return liveCopies(exec.buffers[0], lib, ['k']) ?? linearizable(callsOf(exec), model, outcome);
  },
};
