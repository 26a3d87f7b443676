// A reservation cancelled after a reset or a block of its key. A reset makes the key fresh: what
// it owed before, the reservation included, is forgotten, and later admissions count from there.
// A cancel that then gave its count back took it from those later admissions (found: on a fixed
// window of 1 a second, allow, reserve, reset, allow, reserve, cancel the first: a third
// reservation of the same window was admitted, 2 of 1). A block refuses until its end; a cancel
// after it must not bring that end closer. On the lock-free engine (several limits, a global cap,
// the windows) a reset and a block move the key's give-back epoch by RESET_STEP, which a cancel
// reads (rate/give-back-guard.ts).
import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { ManualClock, perHour, perSecond, RateLimiter, type Limit, type Reservation } from '../../src/index.js';
import { markedTryAcquire, spendGiveBack, windowGiveBack } from '../../src/rate/rate-limiter.js';
import { pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { interleaved, withAtomicsHooks } from '../helpers/atomics-spy.js';
import { slotBaseOf } from '../helpers/slots.js';
import { S_TAT } from '../../src/table/layout.js';

type Case = [name: string, limit: Limit | Limit[], extra: { algorithm?: 'fixed-window' | 'sliding-window'; globalLimit?: Limit; maxBlockMs?: number }];

// The one-limit path keeps a key's state in one word, its TAT; a long maxBlockMs makes it 64 bits.
const oneLimitCases: Case[] = [
  ['one GCRA limit', perSecond(1), {}],
  ['one GCRA limit of a 64-bit word', perSecond(1), { maxBlockMs: 30 * 86_400_000 }],
];

const engineCases: Case[] = [
  ['a fixed window', perSecond(1), { algorithm: 'fixed-window' }],
  ['two GCRA limits', [perSecond(1), perHour(1_000)], {}],
  ['a GCRA limit under a global cap', perSecond(1), { globalLimit: perSecond(1_000) }],
  ['two fixed windows', [perSecond(1), perHour(1_000)], { algorithm: 'fixed-window' }],
  ['two GCRA limits of 64-bit words', [perSecond(1), perHour(1_000)], { maxBlockMs: 30 * 86_400_000 }],
];

function limiterFor(limit: Limit | Limit[], extra: Case[2], clock: ManualClock): RateLimiter {
  const rl = new RateLimiter({ limit, maxKeys: 8, ...extra, clock });
  // The one-limit cases run at the width they name (a maxBlockMs can move a limit to 64 bits).
  if (!Array.isArray(limit) && extra.algorithm === undefined && extra.globalLimit === undefined) {
    expect(rl.width).toBe(extra.maxBlockMs === undefined ? 32 : 64);
  }
  return rl;
}

const allCases = [...engineCases, ...oneLimitCases];

/** The delay of one more reservation of 'k', or the error's name. */
function third(rl: RateLimiter): number | string {
  try {
    return rl.reserve('k', { maxWaitMs: 5_000 }).delayMs;
  } catch (e) {
    return (e as Error).name;
  }
}

/** Runs a reset of 'k' in a worker that dies holding the key's guard, after the reset's writes. */
async function deadReset(rl: RateLimiter): Promise<void> {
  const worker = new Worker(new URL('../fixtures/dead-reset-worker.mjs', import.meta.url), { workerData: { handle: rl.handle } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
}

describe('a reservation cancelled after a reset or block of its key', () => {
  it.each(allCases)('found: %s: a cancel after a reset gives nothing back; the key stays at its limit', (_name, limit, extra) => {
    const clock = new ManualClock(10_000);
    const rl = limiterFor(limit, extra, clock);
    expect(rl.allow('k')).toBe(true);
    const first = rl.reserve('k', { maxWaitMs: 5_000 });
    expect(first.delayMs).toBe(1_000);
    expect(rl.reset('k')).toBe(true);
    expect(rl.allow('k')).toBe(true);
    expect(rl.reserve('k', { maxWaitMs: 5_000 }).delayMs).toBe(1_000);
    // Counted in a state the reset forgot; under a cap, the cap's count stays too: a key's reset
    // leaves the cap alone, but requests were counted on the cap after it (a cancel then gives
    // a limit nothing: docs/design.md, "Reservations").
    expect(first.cancel()).toBe(false);
    // Not a second place at 11,000: GCRA holds the next one at 12,000; a window holds none
    // past the next window.
    expect(third(rl)).toBe(extra.algorithm === undefined ? 2_000 : 'RateLimitTimeoutError');
  });

  it.each(allCases)('%s: a cancel after another give-back, and no reset, still gives its count back', (_name, limit, extra) => {
    const clock = new ManualClock(10_000);
    const rl = limiterFor(limit, extra, clock);
    expect(extra.algorithm === undefined ? markedTryAcquire(rl, 'k', 1).allowed : rl.allow('k')).toBe(true);
    const back = extra.algorithm === undefined ? spendGiveBack(rl, 'k', 1) : windowGiveBack(rl, 'k', 1);
    const first = rl.reserve('k', { maxWaitMs: 5_000 });
    expect(first.delayMs).toBe(1_000);
    back(); // the allow's spend given back: the epoch moves by one, not by a reset's step
    expect(first.cancel()).toBe(true);
    if (extra.algorithm === undefined) {
      // The allow's give-back gave nothing: the reservation stacked on it was still to act
      // (math/gcra.ts laterMayAct). The cancel gave the reservation's count back: the key owes
      // the allow's interval alone, and one passes when it ends, not two.
      expect(rl.allow('k')).toBe(false);
      clock.advance(1_000);
      expect(rl.allow('k')).toBe(true);
      expect(rl.allow('k')).toBe(false);
    } else {
      // A window's give-back stays out of a later window than its reading's (the reservation's
      // was stored): the allow still counts; the next window has its place back.
      expect(rl.allow('k')).toBe(false);
      expect(third(rl)).toBe(1_000);
    }
  });

  it.each(engineCases)('%s: a cancel after a reset that died holding the guard gives nothing back', async (_name, limit, extra) => {
    const clock = new ManualClock(10_000);
    const rl = new RateLimiter({ limit, ...extra, maxKeys: 8, clock, ...stagedReuse(1) });
    expect(rl.allow('k')).toBe(true);
    const first = rl.reserve('k', { maxWaitMs: 5_000 });
    expect(first.delayMs).toBe(1_000);
    await deadReset(rl); // another thread's reset wrote k fresh and died holding the guard
    expect(rl.allow('k')).toBe(true); // counts from the fresh state
    expect(rl.reserve('k', { maxWaitMs: 5_000 }).delayMs).toBe(1_000);
    pastReclaimGuard(1);
    // It takes the dead holder's guard over: that may have been a reset; and the cap counted
    // requests after it (nothing back there either).
    expect(first.cancel()).toBe(false);
    expect(third(rl)).toBe(extra.algorithm === undefined ? 2_000 : 'RateLimitTimeoutError');
  });

  it.each(allCases.filter(([, , extra]) => extra.algorithm === undefined))(
    'found: %s: a cancel after a block does not end the block sooner',
    (_name, limit, extra) => {
      const clock = new ManualClock(10_000);
      const rl = limiterFor(limit, extra, clock);
      expect(rl.allow('k')).toBe(true);
      const first = rl.reserve('k', { maxWaitMs: 5_000 });
      expect(first.delayMs).toBe(1_000);
      rl.block('k', 5_000); // refused until 15,000
      expect(first.cancel()).toBe(extra.globalLimit !== undefined); // the cap's count only
      clock.set(14_999);
      expect(rl.allow('k')).toBe(false);
      clock.set(16_000);
      expect(rl.allow('k')).toBe(true);
    },
  );

  // The one-limit word holds the state alone: a reset, then admissions, can bring it back to the
  // very value a refund read. A refund holds its reset mark's guard from its snapshot to its last
  // write, and a reset waits for it (table/reset-marks.ts; test/rate/mark-guard.test.ts), unless
  // the refund stalled past the table's reuse age: then the reset takes the guard over. A refund
  // stopped that long between its check of the mark and its compareExchange (another thread ran
  // the reset, an allow and a reservation there: on this thread, after a 30 ms reuse age) lands on
  // the fresh state; it loads the mark again after landing and takes its own write back.
  it('one GCRA limit: a refund taken over, whose word came back to its snapshot through a reset, takes its write back', () => {
    const clock = new ManualClock(10_000);
    const a = new RateLimiter({ limit: perSecond(1), maxKeys: 8, clock, ...stagedReuse(1) });
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    const first = a.reserve('k', { maxWaitMs: 5_000 });
    expect(first.delayMs).toBe(1_000);
    const tatAt = slotBaseOf(a.handle.table, 'k') + S_TAT;
    const before = Atomics.load(new Int32Array(a.handle.table), tatAt);
    const cancelled = interleaved(a.handle.table, tatAt, () => {
      expect(b.reset('k')).toBe(true);
      expect(b.allow('k')).toBe(true);
      expect(b.reserve('k', { maxWaitMs: 5_000 }).delayMs).toBe(1_000);
      expect(Atomics.load(new Int32Array(a.handle.table), tatAt)).toBe(before); // the word came back
    }, () => first.cancel());
    expect(cancelled).toBe(false);
    expect(third(a)).toBe(2_000);
  });

  // Found by an attack: WideGcra's block wrote nothing on a key that already owed longer than the
  // block, so a refund that had read the word before the block landed its compareExchange after
  // the block returned; an admission before the refund's take-back kept it, and a reservation
  // decided after the block acted inside it. A block now always changes the word (one tick more,
  // as Gcra32's), and the refund's compareExchange fails.
  it('found: one GCRA limit of a 64-bit word: a refund that read the word before a block that wrote nothing', () => {
    const clock = new ManualClock(10_000);
    const a = new RateLimiter({ limit: perSecond(1), maxBlockMs: 30 * 86_400_000, maxKeys: 8, clock });
    expect(a.width).toBe(64);
    const b = RateLimiter.attach(a.handle, { clock });
    expect(a.allow('k')).toBe(true);
    const first = a.reserve('k', { maxWaitMs: 5_000 });
    expect(first.actAtMs).toBe(11_000); // the key owes until 12,000
    let late: Reservation | null = null;
    let step = 0;
    withAtomicsHooks({
      // Right before the refund's compareExchange: another thread blocks k to 11,500 (k owes longer).
      cas: (arr) => {
        if (step !== 0 || arr.buffer !== a.handle.table) return;
        step = 1;
        b.block('k', 1_500);
        step = 2;
      },
      // Right after it, before the refund's next load: another thread reserves.
      load: (arr) => {
        if (step !== 2 || arr.buffer !== a.handle.table) return;
        step = 3;
        late = b.reserve('k', { maxWaitMs: 5_000 });
      },
    }, () => first.cancel());
    expect(step).toBe(3);
    expect((late as Reservation | null)?.actAtMs).toBeGreaterThanOrEqual(11_500);
  });
});
