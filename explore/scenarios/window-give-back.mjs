// The middleware's window give-back (skipFailedRequests: RateLimiter's windowGiveBack) racing a
// reset of its key and other decisions. One fixed window of 1 a second. Thread 0 is admitted,
// takes the give-back of that admission at once (as the middleware does), then reads the key
// (a probe of cost 0) and gives back; thread 1 resets the key, then spends it; thread 2 spends it.
// The schedule this is for (one preemption): the spend, the reset (the key fresh), thread 1's
// admission (the window full again), then the give-back: it must give nothing, since the reset
// took the spend away and the state counts thread 1's admission only (LockFreeEngine.giveBack's
// mark: the key's give-back epoch, which every give-back and reset moves on, unchanged since the
// spend's decision read it); thread 2's admission would be one past the limit. Checked: every admission against a fixed-window model that gives a spend back only
// into the window, and the state since the last reset, that counted it (a give-back that gives
// less than that is conservative, not judged); one live copy of the key.
import { callsOf, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';

const PERMITS = 1;
const PERIOD_MS = 1000;
const START_MS = 4999.75;

/**
 * A fixed window of PERMITS per PERIOD_MS for one key, with resets (a new lineage) and the
 * give-back of one recorded spend (thread 0's): it gives only while the state that counted the
 * spend stands (no reset since), in the spend's window, at a reading in that window.
 */
function giveBackModel() {
  const windowOf = (ms) => Math.floor(ms / PERIOD_MS);
  return {
    init: () => ({ win: -Infinity, count: 0, gen: 0, spend: null }),
    judge(st, o, reading) {
      const now = windowOf(reading);
      const win = st.win >= now ? st.win : now;
      const count = st.win >= now ? st.count : 0;
      if (o.op === 'reset') return { admit: true, refuses: false, next: { win: -Infinity, count: 0, gen: st.gen + 1, spend: st.spend } };
      if (o.op === 'giveBack') {
        const sp = st.spend;
        const gives = sp !== null && sp.gen === st.gen && sp.win === now && st.win === sp.win && st.count >= o.cost;
        return { admit: true, refuses: false, next: gives ? { ...st, count: st.count - o.cost, spend: null } : { ...st, spend: null } };
      }
      const admit = win === now && count + o.cost <= PERMITS;
      const next = { ...st, win, count: count + o.cost, spend: o.spend ? { gen: st.gen, win } : st.spend };
      return { admit, refuses: !admit, next };
    },
  };
}

export default {
  name: 'window-give-back',
  what: "the middleware's window give-back (windowGiveBack) racing a reset of its key and decisions",
  // Forward moves only. With a step back, the deep search found (replay "0:1 25:1 33:2 37:1 45:5
  // 49:1 51:6") a spend decided at the second another thread's overlapping decision had stamped
  // before the clock stepped back (its reading raised to that stamp), given back, and that other
  // decision admitted after: each window held one admission net, but no order of the calls lets
  // the checker use the later call's reading to raise the earlier one's and still admit both.
  // Steps back are explored where they are the subject (gcra-32-decide, fixed-window, reserve).
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: PERIOD_MS, backMs: [] }),
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: { permits: PERMITS, periodMs: PERIOD_MS }, algorithm: 'fixed-window', maxKeys: 4, hashSeed: 7 });
    rl.reset('k'); // the key in the table, fresh
    rl.penalty('k', 0);
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      let giveBack = null;
      ctx.ready();
      ctx.call('spend', () => {
        const admitted = rl.allow('k');
        if (admitted) giveBack = lib.windowGiveBack(rl, 'k', 1); // as the middleware: right after the admission
        return admitted;
      });
      ctx.call('giveBack', () => {
        rl.tryAcquire('k', 0); // a reading before the give-back's own (it may read none)
        giveBack?.();
        return true;
      });
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
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
    const outcome = (c) => {
      if (c.label === 'spend') return { key: 'k', cost: 1, admitted: c.result === true, spend: true };
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'reset') return { key: 'k', cost: 0, admitted: true, op: 'reset' };
      if (c.label === 'giveBack') return { key: 'k', cost: 1, admitted: true, op: 'giveBack' };
      return null;
    };
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(callsOf(exec), giveBackModel(), outcome, { since: exec.startMs, judgeRefusals: false });
  },
};
