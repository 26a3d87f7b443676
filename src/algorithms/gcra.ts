import {
  admit, blockDebtTicks, debtOf, gcraParams, lagTicks, laterMayAct, MAX_AHEAD_TICKS, remainingAt, unspentTicks, waitTicks, type GcraParams,
} from '../math/gcra.js';
import { ceilTicks, fineTicksAt, maxWaitTicks, ticksAt, ticksToMs } from '../time/ticks.js';
import type { Limit } from '../config/limit.js';
import { wideGcra } from './gcra-64.js';
import { swap, type LimitAlgorithm, type Moment, type Verdict } from './types.js';

/**
 * GCRA as an algorithm of the engines (keys with several limits or a global cap, PolicyLimiter's
 * rules): the same integer math as the one-limit paths (`../rate/gcra-32.ts`,
 * `../rate/gcra-wide.ts`), at the width the limit needs. A 32-bit limit keeps one TAT word
 * (`NarrowGcra`, below); a 64-bit one keeps the TAT's two halves, its own staleness unit and its
 * tick (gcra-64.ts).
 */
export function gcraAlgorithm(limit: Limit, name: string, minWidth: 32 | 64 = 32, wideTickPs = 0): LimitAlgorithm {
  const p: GcraParams = gcraParams(limit, name, minWidth, wideTickPs);
  return p.width === 32 ? narrowGcra(p) : wideGcra(p);
}

function narrowGcra(p: GcraParams): LimitAlgorithm {
  return new NarrowGcra(p);
}

/**
 * A 32-bit GCRA limit: one TAT word. A class rather than a closure so that every instance shares
 * its methods: a decision over several limits then calls one function at each call site.
 */
export class NarrowGcra implements LimitAlgorithm {
  readonly stateWords = 1;
  readonly staleSec: number;
  readonly lockFree = true;
  readonly gcra = true;
  readonly #p: GcraParams;
  /** The integer parameters (for the global cap's batches, src/rate/global-batch.ts). */
  get params(): GcraParams {
    return this.#p;
  }
  // The snapshot, the reading of the last check, and what it decided.
  #tat = 0;
  #now32 = 0;
  #next = 0;
  #written = 0;
  #spentCost = 0;
  // The latest reading and its ticks (#debt); per thread, like the snapshot. The same cache as
  // Gcra32#convert, inline for the reason given there.
  #readMs = NaN;
  #readTicks = 0;
  /** Ticks per ms for ticks of at most 1 ms (fineTicksAt), else 0 (ticksAt): as Gcra32 keeps it. */
  readonly #perMs: number;

  constructor(p: GcraParams) {
    this.#p = p;
    this.staleSec = p.staleSec;
    this.#perMs = p.tickPs <= 1e9 ? 1e9 / p.tickPs : 0;
  }

  #debt(m: Moment, stale: boolean): number {
    // The reading in ticks, converted once per reading (a coarse or manual clock repeats it).
    if (m.ms !== this.#readMs) {
      this.#readMs = m.ms;
      const perMs = this.#perMs;
      this.#readTicks = perMs === 0 ? ticksAt(m.ms, this.#p) : fineTicksAt(m.ms, perMs);
    }
    this.#now32 = this.#readTicks;
    return stale ? 0 : debtOf(this.#tat, this.#now32, 0, 0, this.#p);
  }

  init(w: Int32Array, at: number, m: Moment): void {
    Atomics.store(w, at, ticksAt(m.ms, this.#p));
  }

  load(w: Int32Array, at: number): void {
    this.#tat = Atomics.load(w, at);
  }

  /**
   * Takes `word`, this thread's own latest write of the state (no load), as the snapshot: a
   * `commit` from it lands only if the state still holds it (LockFreeEngine#allowOwn).
   */
  own(word: number): void {
    this.#tat = word;
  }

  /** The word the last `load` (or `own`) read. */
  get loaded(): number {
    return this.#tat;
  }

  /** The word the last `commit` wrote. */
  get written(): number {
    return this.#written;
  }

  /** The largest cost a request can ever pass with: the burst. */
  get capacity(): number {
    return this.#p.burst;
  }

  /** `check` for a verdict without detail: whether `cost` passes on the snapshot. */
  admits(m: Moment, stale: boolean, cost: number): boolean {
    const p = this.#p;
    const n = cost > p.burst ? -1 : admit(this.#debt(m, stale), cost, p);
    this.#next = n;
    this.#spentCost = cost;
    return n >= 0;
  }

  check(m: Moment, stale: boolean, cost: number, v: Verdict): void {
    const p = this.#p;
    const d = this.#debt(m, stale);
    const n = cost > p.burst ? -1 : admit(d, cost, p);
    v.allowed = n >= 0;
    this.#next = n;
    this.#spentCost = cost;
    if (!v.detail) {
      v.waitMs = cost > p.burst ? Infinity : 0;
      return;
    }
    v.remaining = remainingAt(v.allowed ? n : d, p);
    v.waitMs = v.allowed ? 0 : ticksToMs(waitTicks(d, cost, p), p);
    v.resetMs = ticksToMs(v.allowed ? n : d, p);
  }

  reserve(m: Moment, stale: boolean, cost: number, maxWaitMs: number, v: Verdict, notBeforeMs = 0): void {
    const p = this.#p;
    const d = this.#debt(m, stale);
    const ct = cost * p.intervalTicks;
    // The request acts after this limit's own wait, or later when another limit or the cap makes
    // it wait longer (`notBeforeMs`, rounded up to a tick): the slot starts where it acts, as an
    // admission then would place it, so that the requests after it are spaced from its act
    // (found: counted at the reservation's reading, two reservations a cap held 500 ms acted 10
    // ms apart under one per 100 ms). Such a slot can start past the TAT: nothing before it is
    // then given back (`refund`, and LockFreeEngine moves the key's give-back epoch on).
    const from = notBeforeMs > 0 ? ceilTicks((notBeforeMs * 1e9) / p.tickPs) : 0;
    const delay = Math.max(0, d + ct - p.toleranceTicks, from);
    const n = Math.max(d, delay) + ct;
    v.allowed = cost <= p.burst && delay <= maxWaitTicks(maxWaitMs, p) && n <= MAX_AHEAD_TICKS - lagTicks(p);
    v.waitMs = cost > p.burst ? Infinity : ticksToMs(delay, p);
    v.remaining = remainingAt(v.allowed ? n : d, p);
    v.resetMs = ticksToMs(v.allowed ? n : d, p);
    // What it counted holds for an act within the tick its slot starts in (a reading counts at
    // its tick, floored); a later act is decided again from there (LimitSet.check).
    v.latestMs = ticksToMs(delay + 1, p);
    this.#next = n;
    this.#spentCost = cost;
  }

  force(m: Moment, stale: boolean, cost: number, blockMs: number, clamp: boolean, v: Verdict, sinceMs = Infinity): void {
    const p = this.#p;
    const d = this.#debt(m, stale);
    const horizon = MAX_AHEAD_TICKS - lagTicks(p);
    const block = blockMs < 0 ? -1 : blockDebtTicks(blockMs, p);
    // A penalty adds its cost (a reward's negative cost gives back, never below fresh, and a
    // spend's give-back no more than what of that spend is still ahead, and nothing while a later
    // spend stacked on it may still wait to act: laterMayAct, stacked on an admission whenever
    // the debt is past the burst); a block raises to its debt, or one tick past a debt already as
    // long.
    const ownSpend = cost < 0 && sinceMs !== Infinity;
    const add = cost < 0 ? (ownSpend && laterMayAct(d, true, p) ? 0 : -Math.max(0, unspentTicks(-cost, sinceMs, m.ms, p))) : cost * p.intervalTicks;
    let n = block < 0 ? Math.max(0, d + add) : Math.max(d + 1, block);
    if (n > horizon) {
      // Refused that long already, past the horizon (after a step back, or an old TAT under a
      // stamp a stopped decision raised): one tick less, still as long as the block, so that the
      // word changes all the same (see LimitAlgorithm.force).
      if (block >= 0 && d >= block) n = d > block ? d - 1 : d;
      else if (clamp) n = Math.max(d, horizon);
      else n = -1;
    }
    v.allowed = n >= 0;
    v.waitMs = n >= 0 ? 0 : Infinity;
    v.remaining = remainingAt(n >= 0 ? n : d, p);
    v.resetMs = ticksToMs(n >= 0 ? n : d, p);
    v.latestMs = Infinity;
    this.#next = n;
    this.#spentCost = 0;
  }

  commit(w: Int32Array, at: number): boolean {
    this.#written = (this.#now32 + this.#next) | 0; // at the reading of the last check, reserve or force
    return swap(w, at, this.#tat, this.#written);
  }

  undo(w: Int32Array, at: number): boolean {
    return swap(w, at, this.#written, this.#tat);
  }

  slotStart(out: Int32Array): void {
    out[0] = (this.#written - this.#spentCost * this.#p.intervalTicks) | 0;
    out[1] = 0;
  }

  refund(
    w: Int32Array, at: number, m: Moment, startLo: number, _startHi: number, cost: number, exact = false, forgotten: (() => boolean) | null = null,
  ): boolean {
    const q = ticksAt(m.ms, this.#p);
    const ct = cost * this.#p.intervalTicks;
    if (exact) {
      // Only while the TAT still ends exactly where our slot does: a cap served in batches may
      // have jumped past it (a batch starts at max(tat, now + h)), and a later start would then
      // sit below what those batches were charged from.
      const end = (startLo + ct) | 0;
      const back = Math.min(ct, (end - q) | 0);
      return back > 0 && (forgotten === null || !forgotten()) && swap(w, at, end, (end - back) | 0);
    }
    for (;;) {
      const cur = Atomics.load(w, at);
      // Only the part of our slot still ahead of now, and never below now: what others built on
      // top since then stays exactly as they spent it (see docs/design.md, "Reservations").
      const back = Math.min(ct, (startLo + ct - q) | 0, (cur - q) | 0);
      // Nothing once a later spend was counted after our slot (the TAT past its end): it may be a
      // reservation still to act, or one whose slot was placed at its act past the TAT (reserve),
      // and neither moves when ours comes off (docs/design.md, "Reservations").
      if (((cur - startLo - ct) | 0) > 0) return false;
      if (back <= 0 || (forgotten !== null && forgotten())) return false;
      // compareExchange from the value just read: a refund that raced with a spend recomputes.
      if (swap(w, at, cur, (cur - back) | 0)) return true;
    }
  }

  idle(w: Int32Array, at: number, m: Moment, stale: boolean): boolean {
    this.load(w, at);
    return this.#debt(m, stale) === 0;
  }
}
