// Permits of a global cap's per-thread batch given back (src/global-batch.ts, `release`) or a
// reservation's slot on that cap given back (`cancel`): every admission must stay one GCRA
// makes at its reading. Three limiter instances in one thread stand for three threads; whole
// calls interleave on a ManualClock, so each case is one exact schedule.
import { describe, expect, it } from 'vitest';
import { ManualClock, perHour, perSecond, RateLimiter, type Limit } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { byLastReading, replayGcra, type Admission } from '../helpers/model.js';

// 250,000 per second, burst 512: an interval of 4 us, batches of 16 permits held up to 64 us.
const CAP = perSecond(250_000, { burst: 512 });

function setup(limit: Limit | Limit[], startMs = 0) {
  const clock = new ManualClock(startMs);
  const main = new RateLimiter({ limit, globalLimit: CAP, maxKeys: 4096, clock });
  const [a, b, c] = [0, 1, 2].map(() => RateLimiter.attach(main.handle, { clock }));
  const admissions: Admission[] = [];
  let seq = 0;
  /** `n` calls of `who` at `ms` (allow() for batches, tryAcquire() for decisions on the cap's word). */
  const call = (who: RateLimiter, ms: number, n: number, exact = false): number => {
    clock.set(ms);
    let admitted = 0;
    for (let i = 0; i < n; i++) {
      const key = `k${seq++}`;
      if (!(exact ? who.tryAcquire(key).allowed : who.allow(key))) break;
      admissions.push({ t: ms, first: ms, cost: 1, key: 0 });
      admitted++;
    }
    return admitted;
  };
  const check = () => replayGcra(byLastReading(admissions), { ...CAP, burst: CAP.burst as number }, gcraParams(CAP).tickPs / 1e9);
  return { clock, main, a: a as RateLimiter, b: b as RateLimiter, c: c as RateLimiter, call, check };
}

describe('a global cap served in per-thread batches gives back only what is its own', () => {
  it('a batch released 30 s after it was taken gives back nothing (its slots are long past)', () => {
    const { a, c, call, check } = setup(perSecond(1_000_000, { burst: 100_000 }));
    expect(call(a, 0, 1)).toBe(1); // a batch of 16, one used
    // 30 s later (more than 2^31 ticks of 10 ns): the cap is filled by exact decisions.
    expect(call(c, 30_000, 10_000, true)).toBe(512);
    // The stale batch is released on the next call; then the cap has no room left at this reading.
    call(a, 30_000, 100);
    call(c, 30_000, 100, true);
    const r = check();
    expect(r.violations, r.examples.join('\n')).toBe(0);
  });

  it('a release after another batch started past the end of ours', () => {
    const { a, b, c, call, check } = setup(perSecond(1_000_000, { burst: 100_000 }));
    const us = (x: number) => x / 1000;
    call(a, us(0), 1); //   a's batch: slots from 64 us
    call(b, us(70), 1); //  b's batch: the cap's TAT is under 70 us + h, so slots from 134 us
    call(a, us(71), 1); //  a's batch expired: its unused slots are given back, a new batch taken
    call(b, us(134), 15); // b uses its batch at its last moment
    call(a, us(135), 15);
    call(c, us(135), 10_000, true); // exact decisions fill the cap
    const r = check();
    expect(r.violations, r.examples.join('\n')).toBe(0);
  });

  it('a reservation cancelled after a batch started past the end of its slot on the cap', () => {
    // The key limit makes the reservation wait (so it can be cancelled); the cap is idle.
    const { main, b, c, clock, call, check } = setup(perHour(16, { burst: 16 }));
    main.tryAcquire('slow', 16);
    clock.set(1000);
    const reservation = main.reserve('slow', { cost: 16, maxWaitMs: Infinity }); // cap slot [1000, 1000.064) ms
    expect(reservation.delayMs).toBeGreaterThan(0);
    call(b, 1000.001, 1); // b's batch: slots from 1000.001 + h, past the reservation's slot
    clock.set(1000.002);
    reservation.cancel();
    call(b, 1000.0645, 15);
    call(c, 1000.0645, 10_000, true);
    const r = check();
    expect(r.violations, r.examples.join('\n')).toBe(0);
  });
});
