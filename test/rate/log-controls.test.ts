// penalty and reward on the sliding log (LockedControls: under the key's lock, a decision of
// cost 0 whose prepare step forces every limit, forced-state.ts forceUnderLock). A penalty spends
// entries now, past the free ones too (a log holds at most its permits: it then refuses for up to
// a period from now); a reward clears the newest entries that count, never below an empty log,
// moving the head back over them first. block stays GCRA's. A cap is neither charged nor given
// back. Exact on a ManualClock; a reward stopped between its two steps staged; raced on 4 workers.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { H_STATE_OFFSET, S_TAT } from '../../src/table/layout.js';
import { FREE } from '../../src/table/slot-lock.js';
import { slotBaseOf } from '../helpers/slots.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { stagedReuse } from '../helpers/park.js';
import { openGate, result, spawn } from '../helpers/workers.js';

const make = (options: Partial<RateLimiterOptions> = {}) => {
  const clock = new ManualClock(60_000);
  return { clock, l: new RateLimiter({ limit: perMinute(5), algorithm: 'sliding-log', maxKeys: 8, clock, ...options } as RateLimiterOptions) };
};

describe('penalty and reward on a sliding log', () => {
  it('a penalty spends entries now, a reward clears the newest; each returns the state after', () => {
    const { clock, l } = make();
    expect(l.allow('k', 2)).toBe(true);
    clock.advance(10_000);
    expect(l.penalty('k', 2)).toEqual({ remaining: 1, resetAfterMs: 60_000 });
    expect(l.get('k')?.remaining).toBe(1);
    // The newest entry (the penalty's, at 70 s) goes: the newest left is 70 s too, a minute from now.
    expect(l.reward('k', 1)).toEqual({ remaining: 2, resetAfterMs: 60_000 });
    expect(l.reward('k', 1)).toEqual({ remaining: 3, resetAfterMs: 50_000 }); // the newest left: 60 s
    expect(l.allow('k', 3)).toBe(true);
    expect(l.allow('k')).toBe(false);
  });

  it('a penalty past the free entries takes the oldest: the log refuses until the oldest left expires', () => {
    const { clock, l } = make();
    expect(l.allow('k', 3)).toBe(true); // at 60 s
    clock.advance(20_000);
    expect(l.penalty('k', 100)).toEqual({ remaining: 0, resetAfterMs: 60_000 }); // the log holds 5 entries at most
    expect(l.tryAcquire('k').retryAfterMs).toBe(60_000); // every entry is the penalty's now
    clock.advance(59_999);
    expect(l.allow('k')).toBe(false);
    clock.advance(1);
    expect(l.allow('k', 5)).toBe(true);
  });

  it('a reward never gives back below an empty log; on a key the table does not hold it is null and inserts nothing', () => {
    const { l } = make();
    expect(l.reward('nobody', 1)).toBeNull();
    expect(l.stats().liveKeys).toBe(0);
    expect(l.allow('k', 2)).toBe(true);
    expect(l.reward('k', 100)).toEqual({ remaining: 5, resetAfterMs: 0 });
    expect(l.allow('k', 5)).toBe(true);
    expect(l.allow('k')).toBe(false);
  });

  it('bad input is refused by name and changes nothing; block says what it is built for', () => {
    const { l } = make();
    expect(l.penalty('k', 0)).toEqual({ remaining: 5, resetAfterMs: 0 }); // a probe, inserting the key
    expect(() => l.penalty('k', -1)).toThrow(RangeError);
    expect(() => l.reward('k', Number.NaN)).toThrow(RangeError);
    expect(() => l.reward(7 as unknown as string, 1)).toThrow(TypeError);
    expect(() => l.block('k', 1_000)).toThrow(/block\(\) is built for a RateLimiter of GCRA limits on its lock-free paths; this one runs 'sliding-log'/);
    expect(l.get('k')?.remaining).toBe(5);
  });

  it('two logs under a global cap: every key limit spends and gives back; the cap neither', () => {
    const { l } = make({ limit: [perMinute(5), perMinute(50)], globalLimit: perMinute(3) });
    expect(l.penalty('k', 4)?.remaining).toBe(1);
    expect(l.tryAcquire('k', 0).limits?.map((s) => s.remaining)).toEqual([1, 46]);
    expect(l.reward('k', 2)?.remaining).toBe(3);
    expect(l.tryAcquire('k', 0).limits?.map((s) => s.remaining)).toEqual([3, 48]);
    for (const k of ['x', 'y', 'z']) expect(l.allow(k)).toBe(true); // the cap's three
    expect(l.allow('w')).toBe(false);
  });
});

describe('a reward stopped between moving the head back and clearing the entries', () => {
  // The reward writes the head word first, then clears the entries it moved over. A worker
  // terminated between the two leaves those entries at the front with their stamps, newer than
  // the entries after them: the log may count them (conservative), and must still count every
  // entry after them. Cleared first with the head left, they would sit expired behind entries
  // that count, which the search takes to come first: it could skip the counted ones. Staged by
  // throwing out of the reward at its first write of the other kind (an entry after the head).
  // The reward's lock, guarded (table/slot-lock.ts) and left held, is taken over once the table's
  // reuse age old: 20 ms here (by default 30 s).
  it('the entry after them still counts', () => {
    const { clock, l } = make(stagedReuse(1, 20));
    expect(l.allow('k')).toBe(true); // at 60 s
    clock.advance(10_000);
    expect(l.allow('k', 4)).toBe(true); // at 70 s: the log is full
    const state = slotBaseOf(l.handle.table, 'k') + (new Int32Array(l.handle.table)[H_STATE_OFFSET] as number);
    let first: boolean | null = null; // whether the reward's first write was the head word
    expect(() => withAtomicsHooks({
      cas: (arr, i) => {
        if (arr.buffer !== l.handle.table || i < state || i > state + 5) return;
        if (first === null) first = i === state;
        else if ((i === state) !== first) throw new Error('stopped');
      },
    }, () => l.reward('k', 4))).toThrow('stopped');
    clock.advance(20_000); // at 90 s the 60-s entry still counts: 4 pass at most, whatever the 70-s ones read as
    expect(l.get('k')?.remaining).toBeLessThanOrEqual(4);
    expect(l.allow('k', 5)).toBe(false);
  });
});

describe('found by the explorer: a reward whose lock was taken over after its writes landed', () => {
  // The locked protocol runs a decision again when it finds at the end that its lock was taken
  // over, also a decision of cost 0 whose prepare step wrote (a control), and the reward was given
  // back twice (locked-controls: three admitted on a log of two). Staged: once the reward's head
  // word has landed, the lock word is left free, as a holder that took it over after a stall,
  // decided and let go would leave it.
  it('gives back once', () => {
    const { l } = make();
    expect(l.allow('k', 5)).toBe(true); // the log is full
    const table = l.handle.table;
    const base = slotBaseOf(table, 'k');
    const state = base + (new Int32Array(table)[H_STATE_OFFSET] as number);
    let headWritten = false;
    let takenOver = false;
    withAtomicsHooks({
      cas: (arr, i) => { if (arr.buffer === table && i === state) headWritten = true; },
      load: (arr, i) => {
        if (!headWritten || takenOver || arr.buffer !== table || i !== base + S_TAT) return;
        takenOver = true;
        Atomics.store(new Int32Array(table), base + S_TAT, FREE);
      },
    }, () => l.reward('k', 1));
    expect(takenOver).toBe(true);
    expect(l.get('k')?.remaining).toBe(1);
  });
});

describe('penalties and rewards racing decisions on a sliding log, 4 workers', () => {
  it('no admission past the log and the rewards', async () => {
    // A frozen clock: every entry keeps counting. Every worker spends k, penalizes it every third
    // try and rewards it every second (fixtures/worker.mjs 'controls-race'): each reward clears at
    // most one entry, so the admissions never pass the permits plus the rewards. Every decision
    // and control takes the key's lock, so no compareExchange is lost: tried again (up to 6
    // times, each try's workers running longer) until some worker saw another's reward land
    // between two of its own decisions. Found: on 2 cores beside other work, 10 tries of 3,000
    // attempts each saw none (the workers ran one after another), and later 10 tries of up to
    // 30,000 with a test run and an attack's beside them. So a last round forces it: worker 0
    // stops after a refusal of its own, the others run to their end, and the main thread (another
    // thread) gives the whole log back before worker 0 goes on.
    type Reply = { admitted: number; penalties: number; rewards: number; between: number };
    const TRIES = 6;
    for (let attempt = 0; attempt <= TRIES; attempt++) {
      const forced = attempt === TRIES;
      const l = new RateLimiter({ limit: { permits: 30, periodMs: 3_600_000 }, algorithm: 'sliding-log', maxKeys: 8, clock: new ManualClock(0) });
      const gate = new SharedArrayBuffer(8);
      const park = forced ? new SharedArrayBuffer(8) : undefined;
      const attempts = 3_000 * (1 + attempt);
      const workers = Array.from({ length: 4 }, (_, id) => spawn({
        mode: 'controls-race', handle: l.handle, id, key: 'k', attempts, gate, ...(forced && id === 0 ? { parkOnRefusal: park } : {}),
      }));
      await openGate(gate, 4);
      let given = 0;
      let replies: Reply[];
      if (park === undefined) replies = await Promise.all(workers.map((w) => result<Reply>(w)));
      else {
        const flags = new Int32Array(park);
        const first = result<Reply>(workers[0] as (typeof workers)[number]);
        while (Atomics.load(flags, 0) === 0) await new Promise((r) => setTimeout(r, 1));
        const rest = await Promise.all(workers.slice(1).map((w) => result<Reply>(w)));
        // Another thread gives the whole log back while worker 0 waits: its next decision passes.
        expect(l.reward('k', 30)).not.toBeNull();
        given = 30;
        Atomics.store(flags, 1, 1);
        Atomics.notify(flags, 1);
        replies = [await first, ...rest];
      }
      await Promise.all(workers.map((w) => w.terminate()));
      const sum = (f: (r: Reply) => number) => replies.reduce((n, r) => n + f(r), 0);
      const [admitted, rewards] = [sum((r) => r.admitted), sum((r) => r.rewards)];
      expect(admitted).toBeLessThanOrEqual(30 + rewards + given);
      expect(admitted).toBeGreaterThan(30);
      if (replies.some((r) => r.between > 0)) return;
    }
    expect.unreachable('no reward of another thread seen between two decisions, not even in the forced round');
  }, 180_000);
});
