// A reservation cancelled while another thread resets its key (width-32 one-limit path: Gcra32's
// RESERVE, REFUND and RESET modes of #spend, and the slot's reset mark, table/reset-marks.ts).
// 2 a second, burst 2. Thread 0 admits the key twice (set-up), reserves (one interval's wait) and
// cancels; thread 1 resets the key and checks it three times. A reset forgets the reservation: a
// cancel linearized after a reset that came after its reservation gives nothing, or thread 1's
// third check would pass on the reservation's refunded interval (3 admissions in a burst of 2).
// Checked against the exact reservation model (reserve.mjs) with a reset and a count of resets:
// - reset: the key's TAT becomes min(tat, now) (nothing ahead); true when something was ahead;
// - cancel: as reserve.mjs's, unless a reset came between its reservation and it, and then it
//   gives nothing and must answer false.
// Refusals are not judged (judgeRefusals false), only admissions: two conservative outcomes of
// the protocol would read as phantom refusals. A cancel gives nothing when a reset's mark moved
// while its reservation was decided, though the reservation counted in the fresh state. And a
// refund that finds the mark moved after its compareExchange takes its write back from its own
// value: when the refund came before the reset and admissions after the reset brought the word
// back to that value, the take-back charges them an interval (Gcra32.#spend). So the search checks
// the direction that breaks the promise: no admission, reservation or refund that only a refund
// after a reset explains.
import { callsOf, linearizable, units } from '../models.mjs';
import { tableNames, timeMoves } from './common.mjs';
import { reservationModel, reservationOutcome } from './reserve.mjs';

const limit = { permits: 2, periodMs: 1000, burst: 2 };
const TICK_MS = 1e-5;
const INTERVAL_MS = 500;

// The clock moves forward only: a reading raised to the key's stamp after a step back (see Clock)
// is one the model cannot place for a reset's fresh state; the reserve and key-controls scenarios
// cover the step back.
const time = timeMoves({ startMs: 4999.75, tickMs: TICK_MS, intervalMs: INTERVAL_MS, backMs: [] });

/** reservationModel of `lim` with resets: its state, the resets so far, and how many there were at the reservation. */
export function resetModel(lim = limit) {
  const inner = reservationModel(lim, TICK_MS);
  const p = BigInt(lim.permits);
  return {
    init: () => ({ tats: inner.init(), resets: 0, reservedAt: -1 }),
    judge(state, o, reading) {
      if (o.kind === 'reset') {
        const tat = state.tats.get(o.key) ?? null;
        const r = units(reading) * p;
        const owed = tat !== null && tat > r;
        const tats = owed ? new Map(state.tats).set(o.key, r) : state.tats;
        return { admit: owed, refuses: !owed, next: { ...state, tats, resets: state.resets + 1 } };
      }
      if (o.kind === 'cancel' && state.resets !== state.reservedAt) return { admit: false, refuses: true, next: state };
      const v = inner.judge(state.tats, o, reading);
      const reservedAt = o.kind === 'reserve' ? state.resets : state.reservedAt;
      // (The checker takes `next` only for a call that admitted or gave back.)
      return { admit: v.admit, refuses: o.kind === 'cancel' ? true : v.refuses, next: { tats: v.next, resets: state.resets, reservedAt } };
    },
  };
}

export default {
  name: 'reserve-reset',
  what: 'Gcra32 reserve and refund racing a reset of the key and allow (the slot\'s reset mark)',
  time,
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: two admissions, the burst spent
      ctx.call('allow', () => rl.allow('k'));
      ctx.ready();
      let r = null;
      ctx.call('reserve', () => { r = rl.reserve('k'); return { delayMs: r.delayMs, actAtMs: r.actAtMs }; });
      ctx.call('cancel', () => r.cancel());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec) {
    const calls = callsOf(exec);
    const outcome = reservationOutcome(calls);
    const verdict = (c) => (c.label === 'reset' ? { kind: 'reset', key: 'k', cost: 0, admitted: c.result === true } : outcome(c));
    return linearizable(calls, resetModel(), verdict, { judgeRefusals: false });
  },
};
