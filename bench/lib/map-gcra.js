// The single-thread ceiling: GCRA over a plain Map<string, number>, reading the same clock as
// sluice's default (performance.now()). No sharing, no atomics, no hashing in JS.

/** @param {{ permits: number, periodMs: number, burst?: number }} limit */
export function createMapGcra(limit) {
  const intervalMs = limit.periodMs / limit.permits;
  const burst = limit.burst ?? limit.permits;
  const toleranceMs = burst * intervalMs;
  /** @type {Map<string, number>} */
  const tats = new Map();
  return {
    /** @param {string} key */
    allow(key, cost = 1) {
      const now = performance.now();
      const tat = tats.get(key);
      const debt = tat === undefined || tat < now ? 0 : tat - now;
      const next = debt + cost * intervalMs;
      if (next > toleranceMs) return false;
      tats.set(key, now + next);
      return true;
    },
    /** @param {string} key */
    tryAcquire(key, cost = 1) {
      const now = performance.now();
      const tat = tats.get(key);
      const debt = tat === undefined || tat < now ? 0 : tat - now;
      const next = debt + cost * intervalMs;
      if (next > toleranceMs) {
        return { allowed: false, remaining: Math.floor((toleranceMs - debt) / intervalMs), retryAfterMs: next - toleranceMs, resetAfterMs: debt, reason: 'limited' };
      }
      tats.set(key, now + next);
      return { allowed: true, remaining: Math.floor((toleranceMs - next) / intervalMs), retryAfterMs: 0, resetAfterMs: next, reason: 'allowed' };
    },
  };
}

/**
 * `allow` of the same Map GCRA, reading `performance` once instead of the global on every call
 * (the global is an accessor in Node 20, 7 ns a read here; sluice's default clock reads it once
 * per thread). For scale beside the reference above, which reads the global as a user would.
 * Written out again rather than shared: a clock passed in would change what the reference costs.
 * @param {{ permits: number, periodMs: number, burst?: number }} limit
 */
export function createMapGcraReadOnce(limit) {
  const perf = performance;
  const intervalMs = limit.periodMs / limit.permits;
  const toleranceMs = (limit.burst ?? limit.permits) * intervalMs;
  /** @type {Map<string, number>} */
  const tats = new Map();
  return {
    /** @param {string} key */
    allow(key, cost = 1) {
      const now = perf.now();
      const tat = tats.get(key);
      const debt = tat === undefined || tat < now ? 0 : tat - now;
      const next = debt + cost * intervalMs;
      if (next > toleranceMs) return false;
      tats.set(key, now + next);
      return true;
    },
  };
}

/**
 * The churn suite's reference: the same Map GCRA reading an injected `clock` (the one the limiter
 * it is compared with reads), with `sweep()` deleting idle keys: those whose TAT is strictly
 * behind now, so that their state equals a fresh key's (sluice's own idle test). A server with a
 * Map must do this, or its Map grows with every client it has ever seen. Written out again, as
 * createMapGcraReadOnce is: a shared body taking its clock as an argument would change the cost
 * of the references above.
 * @param {{ permits: number, periodMs: number, burst?: number }} limit
 * @param {{ now(): number }} clock
 */
export function createMapGcraSweeping(limit, clock) {
  const intervalMs = limit.periodMs / limit.permits;
  const toleranceMs = (limit.burst ?? limit.permits) * intervalMs;
  /** @type {Map<string, number>} */
  const tats = new Map();
  return {
    /** @param {string} key */
    allow(key, cost = 1) {
      const now = clock.now();
      const tat = tats.get(key);
      const debt = tat === undefined || tat < now ? 0 : tat - now;
      const next = debt + cost * intervalMs;
      if (next > toleranceMs) return false;
      tats.set(key, now + next);
      return true;
    },
    /** Deletes every idle key; returns how many. */
    sweep() {
      const now = clock.now();
      let n = 0;
      for (const [key, tat] of tats) {
        if (tat < now) { tats.delete(key); n++; } // deleting the current entry is safe in a Map's iteration
      }
      return n;
    },
    /** Keys held now (idle ones count until the next sweep). */
    get size() { return tats.size; },
    /** The keys held now. */
    keys() { return tats.keys(); },
  };
}
