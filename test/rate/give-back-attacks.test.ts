// Schedules an attack on the give-back guard found (each failed before its fix), staged in one
// thread: a monkeypatched Atomics.compareExchange runs other calls, a reclaimer's stray token or
// a decision's stopped stamp raise at the chosen step.
// - A holder's compareExchange from a reclaimer's token (which names no incarnation: an owner and
//   a time modulo 2^20 ms repeat) after the key was reclaimed and its slot reused: the undo, or
//   the reset, wrote the next key's state.
// - A reset whose 64-bit state landed but whose staleness-unit word did not (a decision raised
//   it) read and decided again: it wrote away a spend made after it; and answered false.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter } from '../../src/index.js';
import { H_STATE_OFFSET, S_CTRL, S_TAT } from '../../src/table/layout.js';
import { lockToken } from '../../src/table/slot-lock.js';
import { slotBaseOf } from '../helpers/slots.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';

const DAY = 86_400_000;
/** The 64-bit GCRA state's staleness unit (ms). */
const UNIT = 4_096_000;

/** Runs `run` with `hook(i, expected)` called before each compareExchange on `a`'s table. */
function hooked<T>(a: RateLimiter, hook: (i: number, expected: number) => void, run: () => T): T {
  return withAtomicsHooks({ cas: (arr, i, e) => { if (arr.buffer === a.handle.table) hook(i, e); } }, run);
}

describe('found by an attack: a holder took the next key\'s guard through a repeated reclaimer token', () => {
  it('an undo', () => {
    // D (a) commits k's first limit; before its second, B penalizes k (the second now refuses D)
    // and a reclaimer R writes token T and stops. D's undo loads T and ctrl (still k's), then
    // stops before its compareExchange: meanwhile B resets k (taking T over), sweep() reclaims
    // it, k comes back in the same slot as K2, B resets K2 (its epoch as k's was), E is admitted
    // on K2 writing the word D wrote, and a reclaimer of the same owner and millisecond writes T
    // on K2's guard. D's compareExchange from T then landed, and its undo took E's spend.
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ limit: [perMinute(1), perMinute(2)], maxKeys: 4, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    a.penalty('k', 1); // k is in the table, and fresh again
    a.reset('k');
    const w = new Int32Array(a.handle.table);
    const base = slotBaseOf(a.handle.table, 'k');
    const state = base + (w[H_STATE_OFFSET] as number);
    const guard = base + S_TAT;
    const T = lockToken(5, performance.now()); // a reclaimer's token (positive, odd)
    let stage = 0;
    let e2 = false;
    const d = hooked(a, (i, e) => {
      if (stage === 0 && i === state + 1) {
        stage = 1;
        b.penalty('k', 2);
        Atomics.store(w, guard, T);
        stage = 2;
      } else if (stage === 2 && i === guard && e === T) {
        stage = 3;
        b.reset('k');
        expect(b.sweep()).toBe(1);
        b.penalty('k', 0); // K2
        b.reset('k');
        e2 = b.allow('k');
        expect(slotBaseOf(a.handle.table, 'k')).toBe(base);
        Atomics.store(w, guard, T);
      }
    }, () => a.allow('k'));
    expect(stage).toBe(3);
    expect(e2).toBe(true);
    let more = 0;
    for (let i = 0; i < 3; i++) if (b.allow('k')) more++;
    expect((d ? 1 : 0) + more).toBe(0); // K2: one a minute, E has it, the clock frozen
  });

  it('a reset', () => {
    // A reset of k loads T and ctrl, then stops before its compareExchange: k spends, goes idle,
    // is reclaimed, another key takes the slot and is admitted, and T appears on its guard. The
    // reset's compareExchange landed and it wrote the other key fresh.
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ limit: [perMinute(1), perMinute(2)], maxKeys: 256, clock });
    const b = RateLimiter.attach(a.handle, { clock });
    a.penalty('k', 0); // k inserted, fresh
    const w = new Int32Array(a.handle.table);
    const base = slotBaseOf(a.handle.table, 'k');
    const guard = base + S_TAT;
    const ctrl = w[base + S_CTRL];
    const T = lockToken(5, performance.now());
    Atomics.store(w, guard, T); // a reclaimer writes its token and stops
    let fired = false;
    let other = '';
    hooked(a, (i, e) => {
      if (fired || i !== guard || e !== T) return;
      fired = true;
      expect(b.allow('k')).toBe(true);
      clock.advance(120_000);
      expect(b.sweep()).toBe(1);
      for (let n = 0; n < 2000 && other === ''; n++) {
        b.penalty(`j${n}`, 0);
        if (slotBaseOf(a.handle.table, `j${n}`) === base) other = `j${n}`;
      }
      expect(other).not.toBe('');
      expect(b.allow(other)).toBe(true);
      expect(w[base + S_CTRL]).not.toBe(ctrl);
      Atomics.store(w, guard, T);
    }, () => a.reset('k'));
    expect(fired).toBe(true);
    let more = 0;
    for (let i = 0; i < 3; i++) if (b.allow(other)) more++;
    expect(more).toBe(0); // one a minute: the other key's admission stands
  });
});

describe('found by an attack: a 64-bit reset whose state landed and whose staleness unit did not', () => {
  /** The index of limit 0's staleness-unit word (the first state word that holds `unit`). */
  const unitWordOf = (a: RateLimiter, unit: number): number => {
    const w = new Int32Array(a.handle.table);
    const state = slotBaseOf(a.handle.table, 'k') + (w[H_STATE_OFFSET] as number);
    return state + Array.from(w.subarray(state, state + 10)).indexOf(unit);
  };

  it('read and decided again, it wrote away a spend made after it', () => {
    const start = UNIT * 1000 - 5; // 5 ms before a staleness-unit boundary
    const clock = new ManualClock(start);
    const a = new RateLimiter({ limit: [perMinute(1), perMinute(10)], maxKeys: 4, clock, maxBlockMs: 30 * DAY });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    expect(a.allow('k')).toBe(false);
    const unitAt = unitWordOf(a, Math.floor(start / UNIT));
    let fired = false;
    let mid = false;
    hooked(a, (i) => {
      if (fired || i !== unitAt) return;
      fired = true;
      clock.advance(10); // into the next unit
      mid = a.allow('k'); // limit 0 reads the reset's fresh state
    }, () => b.reset('k'));
    expect(fired).toBe(true);
    expect(mid).toBe(true);
    let after = 0;
    for (let i = 0; i < 5; i++) if (b.allow('k')) after++;
    expect(after).toBe(0); // one a minute: the admission during the reset has it
  });

  it('it answered false though it gave back', () => {
    const start = UNIT * 1000 - 50;
    const clock = new ManualClock(start);
    const a = new RateLimiter({ limit: [perMinute(1), perSecond(100)], maxKeys: 4, clock, maxBlockMs: 30 * DAY });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    clock.advance(20);
    expect(a.allow('k')).toBe(false);
    const unit = Math.floor(start / UNIT);
    const unitAt = unitWordOf(a, unit);
    const w = new Int32Array(a.handle.table);
    let fired = false;
    const owed = hooked(a, (i) => {
      if (fired || i !== unitAt) return;
      fired = true;
      clock.advance(40); // the next unit
      Atomics.store(w, unitAt, unit + 1); // a decision's stamp raise; that thread then stops
    }, () => b.reset('k'));
    expect(fired).toBe(true);
    expect(b.allow('k')).toBe(true); // it gave back
    expect(owed).toBe(true);
  });
});
