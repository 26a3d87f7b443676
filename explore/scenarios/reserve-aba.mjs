// A reservation's cancel on the width-32 one-limit path (Gcra32's REFUND mode, under its slot's
// reset mark guard: table/reset-marks.ts) against a reset and a reservation that bring the key's
// word back to the very value the cancel read (1 a second, burst 1; the clock stays unless a move
// is chosen). Thread 0 admits the key and reserves one interval ahead (set-up), then cancels;
// thread 1 resets the key, checks it and reserves; thread 2 reserves. On a clock that stays,
// thread 1's check and reservation after the reset write the TAT thread 0's pair wrote. A cancel
// that checked the mark before the reset and made its compareExchange after it would land on the
// fresh state, and thread 2's reservation would get one interval's wait where two are due (found
// by an attack on the guard's first version, with the guard taken out of the refund alone).
// Checked as reserve-reset: the exact reservation model with resets (a cancel after a reset gives
// nothing), admissions and reservations only.
import { callsOf, linearizable } from '../models.mjs';
import { tableNames } from './common.mjs';
import { giveBackTime } from './_give-back.mjs';
import { reservationOutcome } from './reserve.mjs';
import { resetModel } from './reserve-reset.mjs';

const limit = { permits: 1, periodMs: 1000, burst: 1 };

export default {
  name: 'reserve-aba',
  what: "Gcra32's cancel racing a reset and a reservation that bring the key's word back to the cancel's snapshot",
  time: giveBackTime,
  // As gcra-give-back-aba: no clock move or stale read is needed to rebuild the word.
  bounds: { ci: { timeMoves: 0, staleReads: 0, dfsBudgetMs: 5_000, pctBudgetMs: 500 }, deep: { timeMoves: 1, staleReads: 1 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      let r = null;
      ctx.call('allow', () => rl.allow('k')); // set-up, checked calls before the threads start
      ctx.call('reserve', () => { r = rl.reserve('k'); return { delayMs: r.delayMs, actAtMs: r.actAtMs }; });
      ctx.ready();
      ctx.call('cancel', () => r.cancel());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('allow', () => rl.allow('k'));
      let r = null;
      ctx.call('reserve', () => { r = rl.reserve('k'); return { delayMs: r.delayMs, actAtMs: r.actAtMs }; });
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      let r = null;
      ctx.call('reserve', () => { r = rl.reserve('k'); return { delayMs: r.delayMs, actAtMs: r.actAtMs }; });
    },
  ],
  names: tableNames,
  check(exec) {
    const calls = callsOf(exec);
    const outcome = reservationOutcome(calls);
    const verdict = (c) => (c.label === 'reset' ? { kind: 'reset', key: 'k', cost: 0, admitted: c.result === true } : outcome(c));
    return linearizable(calls, resetModel(limit), verdict, { judgeRefusals: false });
  },
};
