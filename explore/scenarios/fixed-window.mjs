// The fixed window in one int32 word (FixedWindow32) on the lock-free engine, with a
// reservation and its cancel, and sweep() reclaiming the key. One permit per 1000 ms window;
// thread 0 spends the window's permit in its set-up (the key's insert is not explored here) and
// checks the key again, thread 1 reserves a place (in this window, or in the next when
// this one is full) and cancels it, thread 2 sweeps. The clock may move to the window's edge or
// back: a reclaim is right only when the key's state equals a fresh key's at the sweep's
// reading, so a cancelled place in a later window must keep the key (a reclaim would open the
// reading's window a second time).
// Checked: admissions, reservations and cancels against the exact fixed-window model
// (_windows.mjs), judged at readings the calls made (where the key was reclaimed under a call,
// see reclaimedUnderCall: refusals not judged, and cancels taken as they come); one live copy of
// the key.
import { callsOf, linearizable } from '../models.mjs';
import { liveCopies, reclaimedUnderCall, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel } from './_windows.mjs';

const limit = { permits: 1, periodMs: 1000 };
const MAX_WAIT_MS = 2000;
const START_MS = 4999.75;

export default {
  name: 'fixed-window',
  what: 'FixedWindow32 decide, reserve, cancel (take-back) and the reclaim idle test, with sweep',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), algorithm: 'fixed-window', maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS: the window's one permit
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      let held = null;
      ctx.call('reserve', () => {
        try {
          held = rl.reserve('k', { maxWaitMs: MAX_WAIT_MS });
          return { admitted: true, delayMs: held.delayMs, actAtMs: held.actAtMs };
        } catch (e) {
          if (e instanceof lib.RateLimitTimeoutError) return { admitted: false };
          throw e;
        }
      });
      if (held !== null) ctx.call('cancel', () => held.cancel());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
  ],
  names: tableNames,
  check(exec, lib) {
    // The set-up's admission comes first, at START_MS.
    const calls = [{ label: 'allow', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 0, index: -1 }, ...callsOf(exec)];
    const reserved = calls.find((c) => c.label === 'reserve')?.result ?? null;
    const reclaimed = reclaimedUnderCall(exec, lib);
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true, op: 'allow' };
      if (c.label === 'reserve') return { key: 'k', cost: 1, admitted: c.result.admitted, op: 'reserve', maxWaitMs: MAX_WAIT_MS, win: null };
      if (c.label === 'cancel') {
        // A place with a wait starts its window; one without is in the reading's window.
        const win = reserved.delayMs > 0 ? Math.round(reserved.actAtMs / limit.periodMs) : Math.floor(reserved.actAtMs / limit.periodMs);
        // Where the key was reclaimed under a call, a decision that lost its race there may keep a
        // spend in the key's new incarnation (conservative), which can move a reservation to a
        // later window than the model's; its cancel then gives back a place the model never
        // placed (found by an attack: "0:2 8:3 15:1 21:1 44:1 50:2", PCT). Such a cancel is
        // taken as it comes (lenient): it gives back what the model holds, if anything.
        return { key: 'k', cost: 1, admitted: c.result === true, op: 'cancel', actAtMs: reserved.actAtMs, win, lenient: reclaimed };
      }
      return null; // sweep: not a decision
    };
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(calls, fixedWindowModel(limit), outcome, { judgeRefusals: !reclaimed });
  },
};
