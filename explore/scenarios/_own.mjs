// Two 32-bit GCRA limits on one key, an admission that starts from this thread's own latest
// writes (LockFreeEngine#allowOwn: no load of either limit, a compareExchange from each own
// write, the first taken back when the second lost its race) racing one from loads. Thread 0
// admits the key twice: its first admission loads and writes both limits, and its second, in the
// same second, starts from those writes. Thread 1 admits it once, from loads. One limit holds two
// a minute, so at most two of the three pass; the other (ten a second) lets each through, so the
// tight limit's commit, when another thread overtook it, must count: `tightFirst` says which
// limit is the tight one (multi-limit-own: the first, multi-limit-own-second: the second).
// Readings start 250 ms before a second's end, so that a move to the next second (where
// #allowOwn gives way to loads) is one of the schedules. Checked: admissions and refusals
// against both GCRA models together (each limit's readings floored to its tick); one live copy
// of the key.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const perMinute = { permits: 2, periodMs: 60_000, burst: 2 };
const perSecond = { permits: 10, periodMs: 1000, burst: 10 };

/** The scenario, with the tight limit (two a minute) first or second. */
export function ownWriteScenario(name, tightFirst) {
  const which = tightFirst ? 'first' : 'second';
  return {
    name,
    what: `LockFreeEngine with two GCRA limits: an admission from the thread's own writes racing one from loads (the ${which} limit binds)`,
    time: timeMoves({ startMs: 3999.75, tickMs: 1e-5, intervalMs: 100 }),
    setup(lib) {
      const limits = tightFirst ? [lib.perMinute(2), lib.perSecond(10)] : [lib.perSecond(10), lib.perMinute(2)];
      const rl = new lib.RateLimiter({ limit: limits, maxKeys: 4, hashSeed: 7 });
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
      // Each limit floors readings to its own tick: 1 us per minute, 10 ns per second.
      const minute = tickEarly(gcraModel(perMinute, { refusalSlackMs: 1e-3 }), 1e-3);
      const second = tickEarly(gcraModel(perSecond, { refusalSlackMs: 1e-5 }), 1e-5);
      const model = tightFirst ? allOf(minute, second) : allOf(second, minute);
      return liveCopies(exec.buffers[0], lib, ['k'])
        ?? linearizable(callsOf(exec), model, (c) => ({ key: 'k', cost: 1, admitted: c.result === true }));
    },
  };
}
