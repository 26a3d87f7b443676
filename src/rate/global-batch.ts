import { debtOf, type GcraParams } from '../math/gcra.js';
import { raiseStamp, secondsAt, unitsAhead } from '../time/stamps.js';
import { ticksAt } from '../time/ticks.js';
import type { StateArea } from './limit-set.js';
import { backoff } from './backoff.js';

/** `take` results. */
export const TAKEN = 0;
/** No batch fits (the cap is near its limit): decide on the shared word itself. */
export const FALLBACK = 1;

/** The longest a batch stays usable, in ms. */
const MAX_HOLD_MS = 1;
/** The most permits one batch holds. */
const MAX_BATCH = 64;
/** Batches pay only when they hold at least this many permits. */
const MIN_BATCH = 8;

/**
 * Per-thread batches of a global GCRA cap, so that `allow()` on a busy cap does not write the
 * one shared word every thread writes on every check. Exact: never more than the cap admits.
 *
 * A thread takes `k` permits at once at its reading `r`: the cap's TAT moves from `tat` to
 * `max(tat, r + h) + k * t` (checked against the tolerance at `r`), and the thread may use the
 * permits for decisions whose reading is at most `r + h`. The batch's slots start no earlier than
 * `r + h`, so each permit is charged at a time no earlier than the one it is used at, in the
 * order GCRA would charge it, and passed the tolerance at a reading no later than its use: every
 * admission is one GCRA would make (docs/design.md, "Batches of a global cap"). Permits left unused
 * are given back only while nothing was charged after them (see `release`).
 * The cost: while batches are out, other threads see the cap up to `h + k * t` further ahead per
 * batch, so near its limit the cap refuses up to that much early (conservative); `h` is at most
 * 1 ms and 1/32 of the tolerance, and caps too slow or too small to fill a batch of 8 in it take
 * no batches at all.
 *
 * Thread-safety: one instance per thread (it is that thread's batch); the cap's words are shared
 * and written only by compareExchange.
 */
export class GlobalBatch {
  readonly #w: Int32Array;
  readonly #area: StateArea;
  readonly #p: GcraParams;
  readonly #hMs: number;
  readonly #hTicks: number;
  readonly #size: number;
  #until = -Infinity;
  #start = 0; // slot start of the batch, ticks modulo 2^32
  #taken = 0;
  #used = 0;
  /** Compare-and-swaps on the cap's word that lost a race. */
  retries = 0;

  /** A batch for the cap with parameters `p` at `area`, or null when batches would not pay. */
  static for(w: Int32Array, area: StateArea, p: GcraParams): GlobalBatch | null {
    const tickMs = p.tickPs / 1e9;
    const hMs = Math.min(MAX_HOLD_MS, (p.toleranceTicks * tickMs) / 32);
    const size = Math.min(MAX_BATCH, Math.floor(hMs / (p.intervalTicks * tickMs)));
    return size >= MIN_BATCH ? new GlobalBatch(w, area, p, hMs, size) : null;
  }

  private constructor(w: Int32Array, area: StateArea, p: GcraParams, hMs: number, size: number) {
    this.#w = w;
    this.#area = area;
    this.#p = p;
    this.#hMs = hMs;
    // One tick more than h: a reading up to r + h is never later than the slot start.
    this.#hTicks = Math.ceil(hMs / (p.tickPs / 1e9)) + 1;
    this.#size = size;
  }

  /**
   * Takes `cost` permits for a decision at reading `ms` (readings on one thread never go back).
   * TAKEN, or FALLBACK when no batch holding `cost` fits: the caller then decides on the cap's
   * word itself. A new batch loads the cap after `ms` was read: a state newer than the reading
   * reads as more spent, never less (the caller keeps the reading fresh, see LimitSet).
   */
  take(ms: number, cost: number, clock: () => number): number {
    if (ms <= this.#until && this.#taken - this.#used >= cost) {
      this.#used += cost;
      return TAKEN;
    }
    this.release(ms);
    // A reading more than a second old (the thread stalled) could not decode the cap's newer TAT:
    // decide afresh instead.
    if (clock() - ms > 1000) return FALLBACK;
    const w = this.#w;
    const p = this.#p;
    const t = p.intervalTicks;
    for (let losses = 0; ; ) {
      // The cap's TAT, then its lastSec (the order of every decision): newer than the reading
      // `ms` at worst, which reads as more spent, never less.
      const tat = Atomics.load(w, this.#area.state);
      const lastSec = Atomics.load(w, this.#area.lastSec);
      const now32 = ticksAt(ms, p);
      const nowSec = secondsAt(ms);
      // The cap's stamp ahead of the reading: a reading older than the cap's state by a second
      // boundary, or a clock that stepped back. Either way the exact path decides (it reads the
      // clock after the cap, and raises a reading behind its stamp: see Clock).
      if (unitsAhead(nowSec, lastSec) !== 0) return FALLBACK;
      const start = Math.max(debtOf(tat, now32, lastSec, nowSec, p), this.#hTicks);
      const k = Math.min(this.#size, Math.floor((p.toleranceTicks - start) / t));
      if (k < cost) return FALLBACK;
      raiseStamp(w, this.#area.lastSec, lastSec, nowSec); // before the commit, as every decision does
      // compareExchange from the TAT read: the batch is charged atomically with its check.
      if (Atomics.compareExchange(w, this.#area.state, tat, (now32 + start + k * t) | 0) === tat) {
        this.#start = (now32 + start) | 0;
        this.#taken = k;
        this.#used = cost;
        this.#until = ms + this.#hMs;
        return TAKEN;
      }
      this.retries++;
      backoff(++losses); // lost the race on the cap's word: wait a little first (backoff.ts)
    }
  }

  /** Returns `cost` permits of the last `take` to the batch (the decision did not admit). */
  giveBack(cost: number): void {
    this.#used -= cost;
  }

  /**
   * Gives the unused permits back to the cap, only while the cap's TAT still ends exactly where
   * this batch left it and the batch is still within its hold: then they are the last slots
   * charged, all still ahead of now, and taking them off leaves what every other spend wrote.
   * Otherwise (another spend or batch came after, possibly jumping past them; or the batch is
   * old, and 32-bit tick arithmetic could no longer tell) they stay spent: conservative.
   */
  release(ms: number): void {
    const t = this.#p.intervalTicks;
    const left = this.#taken - this.#used;
    const end = (this.#start + this.#taken * t) | 0;
    const within = ms <= this.#until;
    this.#taken = 0;
    this.#used = 0;
    this.#until = -Infinity;
    if (left <= 0 || !within) return;
    // compareExchange from the end this batch wrote: fails if anything was charged since.
    Atomics.compareExchange(this.#w, this.#area.state, end, (end - left * t) | 0);
  }
}
