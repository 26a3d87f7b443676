// Reservations and their refunds on the width-32 one-limit path (RateLimiter.reserve,
// Reservation.cancel; Gcra32's RESERVE and REFUND modes of #spend). 2 a second, burst 2: the set-up
// admits the key once, so a reservation made after one more admission must wait one interval.
// Thread 0 reserves and then cancels; thread 1 checks the key twice. A clock move of one whole
// interval (500 ms) lets a check pass exactly when a cancel gave its interval back.
// Checked against an exact GCRA model with reservations:
// - a reservation counts its cost from max(tat, r), whatever the wait; its actAtMs is r plus that
//   wait, max(0, tat' - r - tau), to a tick, and its delayMs is actAtMs less the clock's last
//   reading of the call (the wait, plus how far r is ahead of that reading when the clock stepped
//   back and the decision was clamped to a later reading);
// - cancel() gives back only if the clock read at its first reading is before the reservation's
//   actAtMs (its time has not come), and then gives back what of its cost is still ahead of now:
//   tat -= min(max(0, tat - r), cost * I), at the reading r its refund decided on; it returns
//   false when nothing was ahead (a key with no debt) or its time had come.
// So the admissions, the delays and the refunds are checked together: an admission that only a
// refund larger than the model's explains is an over-admission.
import { callsOf, linearizable, units } from '../models.mjs';
import { tableNames, timeMoves } from './common.mjs';

const limit = { permits: 2, periodMs: 1000, burst: 2 };
const TICK_MS = 1e-5;
const INTERVAL_MS = 500;

const time = timeMoves({ startMs: 4999.75, tickMs: TICK_MS, intervalMs: INTERVAL_MS });
time.moves.splice(2, 0, { name: '+interval', to: (now) => now + INTERVAL_MS });

/**
 * The threads of the reservation scenarios: thread 0 admits the key once (set-up), then reserves
 * and cancels; thread 1 checks the key twice.
 */
export const reserveThreads = [
  (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle);
    ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
    ctx.ready();
    let r = null;
    ctx.call('reserve', () => { r = rl.reserve('k'); return { delayMs: r.delayMs, actAtMs: r.actAtMs }; });
    ctx.call('cancel', () => r.cancel());
  },
  (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle);
    ctx.ready();
    ctx.call('allow', () => rl.allow('k'));
    ctx.call('allow', () => rl.allow('k'));
  },
];

/**
 * The outcome of each call of `reserveThreads` for `reservationModel`; `toModel` turns a time in
 * ms (a delay, an act time) into the model's time (ms, or ticks on a tick grid).
 */
export function reservationOutcome(calls, toModel = (ms) => ms) {
  const reserveOf = new Map(calls.filter((c) => c.label === 'reserve').map((c) => [c.thread, c]));
  return (c) => {
    if (c.label === 'allow') return { kind: 'allow', key: 'k', cost: 1, admitted: c.result === true };
    if (c.label === 'reserve') {
      const { delayMs, actAtMs } = c.result;
      return { kind: 'reserve', key: 'k', cost: 1, admitted: true, delayMs: toModel(delayMs), actAtMs: toModel(actAtMs), rawReading: c.readings.at(-1) };
    }
    // Reservation.cancel compares its first reading with the act time in ms, not on a model's
    // tick grid: a reading one ulp before the act (found: 4,096,000.0000079996 against
    // 4,096,000.000008, deep run of 2026-12-06 on reserve-64) is before it, though both name one tick.
    const rawActAt = reserveOf.get(c.thread).result.actAtMs;
    const timeCame = (c.rawReadings ?? c.readings)[0] >= rawActAt;
    return { kind: 'cancel', key: 'k', cost: 1, admitted: c.result === true, timeCame, actAtMs: toModel(rawActAt) };
  };
}

export default {
  name: 'reserve',
  what: 'Gcra32 reserve and refund (Reservation.cancel) racing allow on one key',
  time,
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: reserveThreads,
  names: tableNames,
  check(exec) {
    const calls = callsOf(exec);
    return linearizable(calls, reservationModel(limit, TICK_MS), reservationOutcome(calls));
  },
};

/**
 * GCRA by virtual scheduling (as gcraModel in models.mjs, in its units: 2^-64 ms / permits) with
 * reservations and refunds. `slackMs`: a refusal within it of conforming is justified, and a
 * reservation's delay may differ from the exact one by that much (readings floor to a tick).
 */
export function reservationModel({ permits, periodMs, burst }, slackMs) {
  const p = BigInt(permits);
  const scale = 2n ** 64n;
  const interval = BigInt(periodMs) * scale;
  const tau = BigInt(burst) * interval;
  const slack = BigInt(Math.ceil(slackMs * 2 ** 64)) * p;
  const toMs = (u) => Number(u / p) / 2 ** 64;
  return {
    init: () => new Map(),
    judge(state, o, reading) {
      const tat = state.get(o.key) ?? null;
      const r = units(reading) * p;
      const start = tat === null || tat < r ? r : tat;
      const cost = BigInt(o.cost) * interval;
      if (o.kind === 'allow') {
        const end = start + cost;
        return { admit: end - r <= tau, refuses: end - r > tau - slack, next: new Map(state).set(o.key, end) };
      }
      if (o.kind === 'reserve') {
        const end = start + cost;
        const wait = end - r - tau > 0n ? end - r - tau : 0n;
        // Judged at a reading r ahead of the clock's last one (a clamp after a step back), the
        // caller waits until the clock reaches r + wait: the delay counts from the clock's reading.
        const actAt = reading + toMs(wait);
        const lead = reading > o.rawReading ? reading - o.rawReading : 0;
        const exact = Math.abs(o.actAtMs - actAt) <= slackMs && Math.abs(o.delayMs - (toMs(wait) + lead)) <= slackMs;
        return { admit: exact, refuses: !exact, next: new Map(state).set(o.key, end) };
      }
      // cancel: its time has come (by its first reading, in ms: reservationOutcome), or nothing
      // of it is ahead: no refund.
      const debt = tat === null || tat <= r ? 0n : tat - r;
      const timeCame = o.timeCame;
      const back = debt < cost ? debt : cost;
      return { admit: !timeCame && debt > 0n, refuses: timeCame || debt <= slack, next: new Map(state).set(o.key, (tat ?? r) - back) };
    },
  };
}
