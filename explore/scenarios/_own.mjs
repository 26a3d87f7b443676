// An admission that starts from this thread's own latest writes (LockFreeEngine#allowOwn: no load
// of the key's limits, a compareExchange from each own write, the first taken back when the
// second lost its race, a cap served from the thread's batch) racing one from loads. Thread 0
// admits the key twice: its first admission loads and writes the key's limits, and its second,
// in the same second, starts from those writes. Thread 1 admits it once, from loads. One limit
// holds two a minute, so at most two of the three pass; any other lets each through, so the
// tight limit's commit, when another thread overtook it, must count. The variants put the tight
// limit first or second of two GCRA limits, or make it a fixed window. (A cap served in batches
// takes this path in global-batch and global-batch-release, whose threads ask several times for
// one key.) Readings start 250 ms before a second's end, so that a move to the next second
// (where #allowOwn gives way to loads) is one of the schedules. Checked: admissions and refusals
// against the models of every limit together (each GCRA limit's readings floored to its tick);
// one live copy of the key.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel, tickEarly } from './_windows.mjs';

const perMinute = { permits: 2, periodMs: 60_000, burst: 2 };
const perSecond = { permits: 10, periodMs: 1000, burst: 10 };
// Each GCRA limit floors readings to its own tick: 1 us at two a minute, 10 ns at ten a second.
const minuteModel = () => tickEarly(gcraModel(perMinute, { refusalSlackMs: 1e-3 }), 1e-3);
const secondModel = () => tickEarly(gcraModel(perSecond, { refusalSlackMs: 1e-5 }), 1e-5);

const VARIANTS = {
  first: {
    what: 'two GCRA limits, the first binds',
    options: (lib) => ({ limit: [lib.perMinute(2), lib.perSecond(10)] }),
    model: () => allOf(minuteModel(), secondModel()),
  },
  second: {
    what: 'two GCRA limits, the second binds',
    options: (lib) => ({ limit: [lib.perSecond(10), lib.perMinute(2)] }),
    model: () => allOf(secondModel(), minuteModel()),
  },
  window: {
    what: 'a fixed window',
    options: () => ({ limit: { permits: 2, periodMs: 60_000 }, algorithm: 'fixed-window' }),
    model: () => fixedWindowModel({ permits: 2, periodMs: 60_000 }),
  },
};

/** The scenario of variant `which` (a key of VARIANTS). */
export function ownWriteScenario(name, which) {
  const v = VARIANTS[which];
  return {
    name,
    what: `an admission from the thread's own writes racing one from loads: ${v.what} (LockFreeEngine#allowOwn)`,
    time: timeMoves({ startMs: 3999.75, tickMs: 1e-5, intervalMs: 100 }),
    // A third of the usual CI budget keeps npm run explore within its 3 minutes (each planted bug
    // of explore/mutations/own-write.mjs is found in under a second).
    bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
    setup(lib) {
      const rl = new lib.RateLimiter({ ...v.options(lib), maxKeys: 4, hashSeed: 7 });
      return { buffers: [rl.handle.table], data: { handle: rl.handle } };
    },
    threads: [
      (ctx, { handle }, lib) => {
        const rl = lib.RateLimiter.attach(handle);
        ctx.ready();
        ctx.call('allow k', () => rl.allow('k'));
        ctx.call('allow k', () => rl.allow('k'));
      },
      (ctx, { handle }, lib) => {
        const rl = lib.RateLimiter.attach(handle);
        ctx.ready();
        ctx.call('allow k', () => rl.allow('k'));
      },
    ],
    names: tableNames,
    check(exec, lib) {
      return liveCopies(exec.buffers[0], lib, ['k'])
        ?? linearizable(callsOf(exec), v.model(), (c) => ({ key: 'k', cost: 1, admitted: c.result === true }));
    },
  };
}
