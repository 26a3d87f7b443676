// Exact sequential models of the window algorithms (fixed and sliding), in the shape
// linearizable() in models.mjs takes: { init(), judge(state, outcome, reading) }.
//
// Fixed window (src/algorithms/fixed-window.ts and fixed-window-32.ts, docs/design.md): windows
// aligned to multiples of periodMs; at most `permits` admissions counted in each. A key keeps one
// window and its count: a decision whose reading falls in a window before the stored one refuses
// (a later window's count is for requests acting in it), one in a later window starts at 0.
// A reservation counts in the reading's window if it has room, else in the next one (refused when
// that is later than the reading's next window or its wait is over maxWaitMs); cancelling before
// its act time takes it back while the key still holds that window.
//
// Sliding window (src/algorithms/sliding-window.ts): the two-window estimate; a request is
// admitted when prev * (1 - into / periodMs) + curr + cost <= permits, in the reading's window.
//
// Outcomes: { key, cost, admitted, op } with op 'allow' (default), 'reserve' (with maxWaitMs and
// the window the limiter counted it in, or null), 'cancel' (with the reservation's window and
// act time; admitted: whether it gave back), 'reset' (fixed window: the key fresh), 'penalty' or
// 'reward' (fixed window: the decided window's count raised by cost, at most to permits, or
// lowered by it, never below 0).

import { callsOf, linearizable } from '../models.mjs';
import { liveCopies } from './common.mjs';

const fresh = { win: -Infinity, count: 0 };

/**
 * The check of window-block and policy-window-block: after a set-up admission at `startMs`,
 * calls 'allow', 'block' (`shortMs`) and 'block-long' (`longMs`) on one key, judged against
 * blockedWindowModel (refusals not judged: a decision that read the window before a block and
 * committed after it keeps its spend, and one whose call overlaps a block may come before it);
 * `liveKey` (the key as the table stores it) has one live copy.
 */
export function checkBlocks(exec, lib, { limit, startMs, shortMs, longMs, liveKey }) {
  const outcome = (c) => {
    if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
    if (c.label === 'block') return { key: 'k', cost: 0, admitted: true, op: 'block', ms: shortMs };
    if (c.label === 'block-long') return { key: 'k', cost: 0, admitted: true, op: 'block', ms: longMs };
    return null;
  };
  const calls = [{ label: 'allow', readings: [startMs], firstStep: -2, lastStep: -1, result: true, thread: 0, index: -1 }, ...callsOf(exec)];
  return liveCopies(exec.buffers[0], lib, [liveKey])
    ?? linearizable(calls, blockedWindowModel(limit), outcome, { since: exec.startMs, judgeRefusals: false });
}

/**
 * fixedWindowModel of `limit` with a block: refused until `until`, raised (never lowered) by op
 * 'block' (o.ms from its reading, to the first whole second at or after the end).
 */
export function blockedWindowModel(limit) {
  const inner = fixedWindowModel(limit);
  return {
    init: () => ({ window: inner.init(), until: -Infinity }),
    judge(state, o, reading) {
      if (o.op === 'block') {
        const until = Math.max(state.until, Math.ceil((reading + o.ms) / 1000) * 1000);
        return { admit: true, refuses: false, next: { window: state.window, until } };
      }
      if (reading < state.until && o.cost > 0) return { admit: false, refuses: true, next: state };
      const j = inner.judge(state.window, o, reading);
      return { admit: j.admit, refuses: j.refuses, next: { window: j.next, until: state.until } };
    },
  };
}

/** Fixed window of `permits` per `periodMs`, per key. */
export function fixedWindowModel({ permits, periodMs }) {
  const windowOf = (ms) => Math.floor(ms / periodMs);
  return {
    init: () => new Map(),
    judge(state, o, reading) {
      const st = state.get(o.key) ?? fresh;
      const now = windowOf(reading);
      const op = o.op ?? 'allow';
      // A reset (RateLimiter.reset): the key is fresh, whatever window it held.
      if (op === 'reset') return { admit: true, refuses: false, next: new Map(state).set(o.key, fresh) };
      if (op === 'cancel') {
        const gives = reading < o.actAtMs && st.win === o.win && st.count >= o.cost;
        const next = gives ? new Map(state).set(o.key, { win: st.win, count: st.count - o.cost }) : state;
        // lenient: whatever the limiter answered, it stands; the model gives back what it holds.
        return o.lenient === true ? { admit: true, refuses: true, next: o.admitted ? next : state } : { admit: gives, refuses: !gives, next };
      }
      // The window decided: the stored one if it is the reading's or later, else the reading's.
      let win = st.win >= now ? st.win : now;
      let count = st.win >= now ? st.count : 0;
      if (op === 'penalty' || op === 'reward') {
        const after = op === 'penalty' ? Math.min(permits, count + o.cost) : Math.max(0, count - o.cost);
        return { admit: true, refuses: false, next: new Map(state).set(o.key, { win, count: after }) };
      }
      if (op === 'allow') {
        const admit = win === now && count + o.cost <= permits;
        return { admit, refuses: !admit, next: new Map(state).set(o.key, { win, count: count + o.cost }) };
      }
      if (count + o.cost > permits) { win += 1; count = 0; }
      const delay = Math.max(0, win * periodMs - reading);
      const admit = o.cost <= permits && win <= now + 1 && delay <= o.maxWaitMs && (o.win === null || o.win === win);
      return { admit, refuses: !(o.cost <= permits && win <= now + 1 && delay <= o.maxWaitMs), next: new Map(state).set(o.key, { win, count: count + o.cost }) };
    },
  };
}

/** Sliding window (two-window estimate) of `permits` per `periodMs`, per key; allow only. */
export function slidingWindowModel({ permits, periodMs }) {
  const windowOf = (ms) => Math.floor(ms / periodMs);
  return {
    init: () => new Map(),
    judge(state, o, reading) {
      const st = state.get(o.key) ?? { win: -Infinity, curr: 0, prev: 0 };
      const now = windowOf(reading);
      if (st.win > now) return { admit: false, refuses: true, next: state };
      const curr = st.win === now ? st.curr : 0;
      const prev = st.win === now ? st.prev : st.win === now - 1 ? st.curr : 0;
      const into = reading - now * periodMs;
      const estimate = prev * (1 - into / periodMs) + curr;
      const admit = o.cost <= permits && estimate + o.cost <= permits;
      return { admit, refuses: !admit, next: new Map(state).set(o.key, { win: now, curr: curr + o.cost, prev }) };
    },
  };
}

/**
 * `model` judged as the limiter judges a reading: floored to its tick. A state that restarts at
 * the reading (an idle key, or its first admission) may then start up to one tick early
 * (docs/design.md, "Exactness": readings between ticks, and negative readings, which are not
 * snapped). An admission that conforms one tick earlier is judged there (its state is then the
 * lower of the two, which every later decision finds no stricter); else at the reading.
 */
export function tickEarly(model, tickMs) {
  return {
    init: () => model.init(),
    judge(state, o, reading) {
      const j = model.judge(state, o, reading);
      const e = model.judge(state, o, reading - tickMs);
      return e.admit ? { admit: true, refuses: j.refuses, next: e.next } : j;
    },
  };
}
