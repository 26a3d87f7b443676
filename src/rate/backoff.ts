/**
 * Backoff after a lost compareExchange: the thread waits a little before it reads the word again,
 * longer after each loss in the same call (exponential, capped, with per-thread jitter), as
 * crossbeam's `Backoff::spin` does. Without it, every thread that lost reads the word, decides and
 * tries again at once, and on one hot key the losers keep taking the word's cache line from the
 * winner: on 16 cores, admissions on one key fell from 14.1 M/s on one worker to 1.6 M/s on 16
 * (bench/RESULTS.md, the contention lab on 16 cores). Only a lost race pays it; an uncontended
 * check never gets here.
 *
 * Thread-safety: the jitter's state is per thread (module state is per worker); nothing is shared.
 */

/** The longest wait, in steps: 2^MAX_STEP spin units. */
const MAX_STEP = 6;

/** A spin unit: one `Atomics.pause()` (a CPU spin-wait hint; Node 24 and later), else a short dependent loop. */
const pause: () => void =
  typeof (Atomics as { pause?: unknown }).pause === 'function'
    ? (Atomics as unknown as { pause: () => void }).pause
    : spinLoop;

/** Where the fallback's loop leaves its value, so that it cannot be dropped as dead code. */
let sink = 0;

/** About as long as a pause hint on current x86 cores (tens of ns): 16 dependent multiply-adds. */
function spinLoop(): void {
  let x = sink;
  for (let i = 0; i < 16; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  sink = x;
}

/** xorshift32 state for the jitter; any non-zero start. */
let seed = 0x9e3779b9 | 0;

/**
 * Waits after the `losses`-th lost compareExchange of one call (1 for the first): between half
 * and all of 2^min(losses, MAX_STEP) spin units, the share drawn per call so that threads that
 * lost together do not come back together.
 */
export function backoff(losses: number): void {
  const units = 1 << (losses < MAX_STEP ? losses : MAX_STEP);
  let s = seed;
  s ^= s << 13;
  s ^= s >>> 17;
  s ^= s << 5;
  seed = s;
  const n = (units >>> 1) + ((s >>> 0) % ((units >>> 1) + 1));
  for (let i = 0; i < n; i++) pause();
}
