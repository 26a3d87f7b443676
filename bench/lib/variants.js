// The three ways to update the shared table that the lab compares. All three use the product's
// layout, key index and GCRA math (imported from the build); they differ only in how the state
// word is updated:
//   cas      - the product: RateLimiter.allow, a compare-and-swap on the key's own word;
//   mutex    - one global lock around every update (spin briefly, then Atomics.wait), plain
//              reads and writes inside it;
//   unlocked - no synchronisation at all: plain reads and writes on the shared array;
//   global-mutex - the product's own decision (any configuration) inside one global lock.
// The mutex and unlocked variants exist only here; they are not options of the library. They
// model the 32-bit path (one int32 TAT word per key), so they need a limit that runs at width 32.
import { ManualClock, monotonicClock, RateLimiter } from 'sluice';
import { admit, debtOf, gcraParams } from '../../dist/math/gcra.js';
import { secondsAt } from '../../dist/time/stamps.js';
import { ticksAt } from '../../dist/time/ticks.js';
import { gcraSlotState } from '../../dist/rate/gcra-slot.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from '../../dist/table/layout.js';
import { DEFAULT_CACHE_SIZE, SlotIndex } from '../../dist/table/slot-index.js';
import { SlotTable } from '../../dist/table/table.js';

export const VARIANTS = ['cas', 'mutex', 'unlocked', 'global-mutex'];

/** A lock word for the mutex variant; share it with every worker alongside the handle. */
export function newLockBuffer() {
  return new SharedArrayBuffer(4);
}

const SPINS = 100;

/** Lock states: 0 free, 1 held, 2 held with (possible) waiters. */
function lock(l) {
  // compareExchange 0 -> 1: the uncontended path, one atomic op.
  if (Atomics.compareExchange(l, 0, 0, 1) === 0) return;
  for (let i = 0; i < SPINS; i++) {
    if (Atomics.load(l, 0) === 0 && Atomics.compareExchange(l, 0, 0, 1) === 0) return;
  }
  // exchange to 2 announces a waiter; Atomics.wait sleeps only while the word is still 2, so a
  // release between the exchange and the wait is not missed.
  while (Atomics.exchange(l, 0, 2) !== 0) Atomics.wait(l, 0, 2);
}

function unlock(l) {
  // exchange to 0 releases; if someone announced waiting, wake one.
  if (Atomics.exchange(l, 0, 0) === 2) Atomics.notify(l, 0, 1);
}

/**
 * Returns `{ allow(key), casRetries() }` for `variant` over the limiter behind `handle`.
 * Thread-safety: one per thread, like the RateLimiter it wraps.
 */
export function attachVariant(variant, handle, lockBuffer) {
  if (variant === 'cas') {
    const limiter = RateLimiter.attach(handle);
    return { allow: (key) => limiter.allow(key), casRetries: () => limiter.stats().casRetries };
  }
  if (variant === 'global-mutex') {
    // The product's whole decision, any configuration, inside one global mutex.
    const limiter = RateLimiter.attach(handle);
    const l = new Int32Array(lockBuffer);
    const allow = (key) => {
      lock(l);
      try {
        return limiter.allow(key);
      } finally {
        unlock(l);
      }
    };
    return { allow, casRetries: () => limiter.stats().casRetries };
  }
  const clock = handle.clock ? new ManualClock(handle.clock) : monotonicClock;
  // The product's own parameters: the limit stored in the table's header, compiled by the same
  // function the limiter's constructor uses.
  const product = RateLimiter.attach(handle);
  const p = gcraParams(product.limit);
  if (product.width !== 32 || p.width !== 32) {
    throw new RangeError(`variant ${variant} models the 32-bit path; this limiter runs at width ${product.width}`);
  }
  const table = new SlotTable(handle.table, gcraSlotState(p, clock), handle.keys);
  const index = new SlotIndex(table, DEFAULT_CACHE_SIZE); // the same cache the product uses
  const w = table.words;

  /** Finds the key's slot, as the product does (lock-free; outside any critical section). */
  function find(key) {
    return index.cached(key) ?? index.locate(key);
  }

  /**
   * One GCRA decision on a found slot with plain reads and writes: correct only when nobody else
   * writes. Returns 1 admitted, 0 refused, -1 stale location (look the key up again).
   */
  function update(e) {
    const base = e.base;
    if (w[base + S_CTRL] !== e.ctrl || w[base + S_TAT] === DEAD) return -1;
    const tat = w[base + S_TAT];
    const nowMs = clock.now();
    const now32 = ticksAt(nowMs, p); // ticks modulo 2^32, an int32
    const nowSec = secondsAt(nowMs);
    const lastSec = w[base + S_LAST_SEC];
    const next = admit(debtOf(tat, now32, lastSec, nowSec, p), 1, p);
    if (next < 0) return 0;
    let newTat = (now32 + next) | 0;
    if (newTat === DEAD) newTat = (newTat + 1) | 0;
    if (lastSec < nowSec) w[base + S_LAST_SEC] = nowSec;
    w[base + S_TAT] = newTat;
    return 1;
  }

  /** Runs `step` (update, or update under the lock) until the location is current. */
  function decide(key, step) {
    for (;;) {
      const e = find(key);
      if (e === undefined) return false;
      const r = step(e);
      if (r >= 0) return r === 1;
      index.forget(key);
    }
  }

  if (variant === 'unlocked') return { allow: (key) => decide(key, update), casRetries: () => 0 };
  if (variant !== 'mutex') throw new RangeError(`variant must be one of ${VARIANTS.join(', ')}, got ${variant}`);
  const l = new Int32Array(lockBuffer);
  // The lock covers only the read-modify-write of the state, the smallest critical section.
  const locked = (e) => {
    lock(l);
    try {
      return update(e);
    } finally {
      unlock(l);
    }
  };
  return { allow: (key) => decide(key, locked), casRetries: () => 0 };
}
