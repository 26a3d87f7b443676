// What the GCRA give-back scenarios share (gcra-give-back, limits-spend-give-back): the threads,
// the clock's jumps and the exact model of a history without the spend given back.
import { callsOf, linearizable, units } from '../models.mjs';
import { liveCopies } from './common.mjs';

const START_MS = 4999.75;

/**
 * GCRA over a history of admissions, `limit` as gcraModel takes it: the TAT is folded over the
 * admissions in order (max(tat, r) + cost * I), and a give-back removes the tagged spend from the
 * history, as if it had never been made. The most a correct give-back may give.
 */
export function historyModel({ permits, periodMs, burst }) {
  const p = BigInt(permits);
  const interval = BigInt(periodMs) * 2n ** 64n;
  const tau = BigInt(burst) * interval;
  const tatOf = (spends) => spends.reduce((tat, s) => (tat === null || tat < s.r ? s.r : tat) + BigInt(s.cost) * interval, null);
  return {
    init: () => [],
    judge(spends, o, reading) {
      if (o.op === 'giveBack') return { admit: true, refuses: false, next: spends.filter((s) => !s.spend) };
      const r = units(reading) * p;
      const tat = tatOf(spends);
      const end = (tat === null || tat < r ? r : tat) + BigInt(o.cost) * interval;
      return { admit: end - r <= tau, refuses: end - r > tau, next: o.cost === 0 ? spends : [...spends, { r, cost: o.cost, spend: o.spend === true }] };
    },
  };
}

/** historyModel, with resets: a reset (true when the key owed anything) forgets every spend before it. */
export function resetHistoryModel(limit) {
  const inner = historyModel(limit);
  const p = BigInt(limit.permits);
  const interval = BigInt(limit.periodMs) * 2n ** 64n;
  return {
    init: inner.init,
    judge(spends, o, reading) {
      if (o.op !== 'reset') return inner.judge(spends, o, reading);
      const r = units(reading) * p;
      const tat = spends.reduce((t, s) => (t === null || t < s.r ? s.r : t) + BigInt(s.cost) * interval, null);
      const owed = tat !== null && tat > r;
      return { admit: owed, refuses: !owed, next: [] };
    },
  };
}

/**
 * Forward moves only, as window-give-back's (see there): a tick, half an interval of 2 a second
 * (part of the spend drained), three such intervals (all of it).
 */
export const giveBackTime = {
  startMs: START_MS,
  moves: [
    { name: 'stay', to: (now) => now },
    { name: 'tick', to: (now) => now + 1e-5 },
    { name: 'half an interval', to: (now) => now + 250 },
    { name: 'three intervals', to: (now) => now + 1500 },
  ],
};

/**
 * Thread 0 is admitted in the set-up (a checked call, before the threads start) and takes the
 * give-back of that admission at once, as the middleware does; it then reads the key (a probe of
 * cost 0) and gives back. Thread 1 spends the key twice; thread 2 once. The spend in the set-up
 * makes the schedule of the found bug cost one clock move and no preemption (thread 1 first,
 * then thread 0, then thread 2): a DFS cut short by a busy machine still reaches it.
 */
export const giveBackThreads = [
  (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle);
    rl.penalty('k', 0); // set-up: the key is in the table, fresh
    let giveBack = null;
    ctx.call('spend', () => {
      const admitted = lib.markedTryAcquire(rl, 'k', 1).allowed;
      if (admitted) giveBack = lib.spendGiveBack(rl, 'k', 1); // as the middleware: right after the admission
      return admitted;
    });
    ctx.ready();
    ctx.call('giveBack', () => {
      rl.tryAcquire('k', 0); // a reading before the give-back's own (it may read none)
      giveBack?.();
      return true;
    });
  },
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
];

/**
 * Every admission against `model` (refusals not judged: a give-back may keep more), one live copy
 * of the key. A reset (gcra-give-back-reset) counts as admitted when it answered true (something
 * was owed).
 */
export function giveBackCheck(exec, lib, model) {
  const outcome = (c) => {
    if (c.label === 'spend') return { key: 'k', cost: 1, admitted: c.result === true, spend: true };
    if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
    if (c.label === 'giveBack') return { key: 'k', cost: 0, admitted: true, op: 'giveBack' };
    if (c.label === 'reset') return { key: 'k', cost: 0, admitted: c.result === true, op: 'reset' };
    return null;
  };
  return liveCopies(exec.buffers[0], lib, ['k'])
    ?? linearizable(callsOf(exec), model, outcome, { since: exec.startMs, judgeRefusals: false });
}
