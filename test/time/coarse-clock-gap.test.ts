// Regression: publish() (src/coarse-clock.ts) once moved word 0 forward only when
// `((next - seen) | 0) > 0`, a signed difference of two 32-bit unit counts. When the published
// reading fell behind performance.now() by 2^31 units or more (every thread of the process
// stopped: SIGSTOP, `docker pause`, a debugger; 2^31 units are 5.97 hours at the finest
// resolution, 0.01 ms, and 24.9 days at 1 ms), the difference read as negative, so no writer could
// move the word: every limiter on the clock lived in frozen time (a key in debt stayed refused,
// acquire() waits did not end) until performance.now() had gone another 2^32 - gap units.
// Writers now compare full readings, decoded through the word's epoch slot.
//
// Deterministic: no updater thread, readings set by publish() (exported for tests), as in
// test/coarse-clock.test.ts.
import { describe, expect, it } from 'vitest';
import { perSecond, RateLimiter } from '../../src/index.js';
import { BYTES, CoarseClock, publish, RESOLUTION_BYTE } from '../../src/time/coarse-clock.js';

function frozen(ms: number, resolutionMs: number): { clock: CoarseClock; w: Int32Array } {
  const buffer = new SharedArrayBuffer(BYTES);
  new Float64Array(buffer, RESOLUTION_BYTE, 1)[0] = resolutionMs;
  const w = new Int32Array(buffer);
  publish(w, ms, resolutionMs);
  return { clock: new CoarseClock(buffer), w };
}

describe('coarseClock after a gap of 2^31 units or more', () => {
  it('control: a gap just under 2^31 units is published', () => {
    const { clock, w } = frozen(1_000, 1);
    const later = 1_000 + 2 ** 31 - 1;
    publish(w, later, 1);
    expect(clock.now()).toBe(later);
  });

  it('moves forward to a reading 2^31 units later (1 ms resolution: 24.9 days)', () => {
    const { clock, w } = frozen(1_000, 1);
    const later = 1_000 + 2 ** 31 + 5;
    publish(w, later, 1); // what the updater and every reader publish after the process resumes
    publish(w, later + 1, 1);
    expect(clock.now(), 'the reading after the clock was published 2^31 + 6 ms later').toBe(later + 1);
  });

  it('moves forward after a 6-hour pause at 0.01 ms resolution, and a limiter on it recovers', () => {
    const res = 0.01;
    const start = 10_000;
    const { clock, w } = frozen(start, res);
    const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: 16, clock });
    expect(limiter.allow('k')).toBe(true);
    expect(limiter.allow('k')).toBe(false);
    const sixHours = 6 * 3600 * 1000; // > 2^31 units of 0.01 ms (5.97 h)
    publish(w, start + sixHours, res);
    publish(w, start + sixHours + 1_000, res);
    expect(clock.now()).toBeGreaterThanOrEqual(start + sixHours);
    expect(limiter.allow('k'), 'a key 6 hours past its debt').toBe(true);
  });
});
