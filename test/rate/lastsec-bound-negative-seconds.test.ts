// Regression: the per-thread lastSec bound (SlotRef.sec, src/table/slot-ref.ts; used by
// Gcra32.#spend and LockFreeEngine#allowGcra) once meant "no bound" by -1, which is also the
// second of every reading in [-1000, 0) ms, which a custom clock may return (only a finite number
// is required). A fresh SlotRef (sec -1) on a thread whose latest reading was in second -1 then
// "guessed" lastSec = -1 without loading it: the key read as recently used, and the admission did
// not raise lastSec (raiseStamp from -1 to -1 is a no-op). Another thread then found the old
// lastSec, judged the key stale, ignored the new debt and admitted over the limit (3 for a burst
// of 1 at one instant). "No bound" is now NaN, which equals no second.
//
// Deterministic: two instances on one thread stand for two threads (each has its own key cache
// and engine); the clock is a plain variable.
import { describe, expect, it } from 'vitest';
import { perMinute, perSecond, RateLimiter, type Limit } from '../../src/index.js';

function run(limit: Limit | Limit[], shiftMs = 0): number {
  let t = -20_000 + shiftMs; // ms: a custom clock whose timeline starts before 0
  const clock = { now: (): number => t };
  const b = new RateLimiter({ limit, maxKeys: 16, clock });
  const a = RateLimiter.attach(b.handle, { clock });
  let admitted = 0;
  if (b.allow('k')) admitted++; // inserts k; lastSec = -20; its debt runs out long before -500 ms
  t = -500 + shiftMs;
  a.allow('other'); // a's latest reading is now in second -1
  if (a.allow('k')) admitted++; // a fresh SlotRef for k: sec -1 === a's second: no lastSec load
  if (b.allow('k')) admitted++; // same instant: burst 1 is spent
  if (a.allow('k')) admitted++;
  return admitted;
}

describe('the lastSec bound and the -1 sentinel', () => {
  it('control: the same steps on a timeline shifted past 0 admit exactly the burst', () => {
    expect(run(perSecond(1, { burst: 1 }), 100_000)).toBe(2);
    expect(run([perSecond(1, { burst: 1 }), perMinute(100, { burst: 5 })], 100_000)).toBe(2);
  });

  it('one limit (Gcra32): at most the burst at one instant', () => {
    expect(run(perSecond(1, { burst: 1 })), 'admissions at t = -500 ms plus the one at -20 s').toBe(2);
  });

  it('two 32-bit GCRA limits (LockFreeEngine#allowGcra): at most the burst at one instant', () => {
    expect(run([perSecond(1, { burst: 1 }), perMinute(100, { burst: 5 })])).toBe(2);
  });
});
