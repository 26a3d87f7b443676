import type { Clock } from '../time/clock.js';
import { cas64 } from '../math/word64.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED, type SlotState } from '../table/table.js';

/**
 * The shared words of the local tier (local-tier.ts): a `SlotTable` (which stores keys in full and
 * handles insert and reclaim races) whose slots each hold three 64-bit words, and a few header
 * words in the table header's limits area, which a tier has no use for.
 *
 * ```
 * header words 64-70:
 * +------------------+--------------------------+------------+----------------------+------------+
 * | clearAt (64-65)  | all-keys refusal (66-67) | leaseMs 68 | refillTimeoutMs 69   | inserts 70 |
 * +------------------+--------------------------+------------+----------------------+------------+
 *
 * one slot (the table allocates it align8: a pad word puts the state on an 8-byte boundary):
 * +------+-----------------+------+----------+-----+---------+---------+---------+-----+
 * | ctrl | tat, lastSec:   | hash | keyBytes | pad | refusal | lease   | refill  | key |
 * |      | unused          |      |          |     | lo, hi  | lo, hi  | lo, hi  |     |
 * +------+-----------------+------+----------+-----+---------+---------+---------+-----+
 *
 * every 64-bit word = stamp (44 bits: a time in whole ms, 0 to LIMIT_MS - 1) | field (20 bits)
 *   hi (int32) = stamp >> 12               lo (int32) = (stamp & 0xfff) << 20 | field
 *   refusal  stamp: when the answer was asked for (askedAt); field: until - askedAt (ms)
 *   lease    stamp: askedAt; field: permits left (at most MAX_PERMITS). The lease expires at
 *            askedAt + leaseMs. Field NONE: no lease yet; the stamp is when the slot started.
 *   refill   stamp: when the refill began; field: the refiller's owner id. All zero: nobody.
 *   clearAt  stamp: the first ms whose answers count; field 0.
 *   DEAD     hi -1, lo 0 (no stamp reaches it). Refusal word: the slot is reclaimed (the table's
 *            marker); lease word: closed for good (a reclaim is under way).
 * ```
 *
 * The invariants, each argued word by word and with every stall in docs/design.md ("The local
 * tier's words"): times are whole ms stored in full, never wrapped; an answer counts only if asked
 * at or after clearAt; within one occupancy every word only increases; a torn read never reports
 * more than a value the word held; and no value of a slot's next occupant equals one of the old
 * one, so a write that stalled across a reclaim and reuse fails.
 *
 * Thread-safety: pure functions over shared words; safe on any thread.
 */

/**
 * One thread's reference to a key's slot (what `SlotRef` is to a rate limiter's table), with the
 * last refusal this thread read there: Redis said that no request of the key could pass before
 * `until`, asking at `stamp`. That stays true whatever later happens to the slot (a refusal is
 * only ever raised, and a slot is reclaimed only once its refusal is over), except after a
 * `clear()` at or after `stamp`; so until `until` the thread answers from here and one load of
 * clearAt, not the slot's words. Per thread, plain fields.
 */
export class TierRef {
  /** -Infinity: no refusal read yet (a number, not a flag: every reading is below none). */
  until = -Infinity;
  stamp = 0;

  constructor(readonly base: number, readonly ctrl: number) {}
}

/** The `H_ALGORITHM` id of a local tier's table (`RateLimiter.attach` refuses it). */
export const LOCAL_TIER_TABLE = 257;

/** Header words: clearAt (lo, hi), the all-keys refusal (lo, hi), the lease and refill times. */
export const T_CLEAR = 64;
export const T_ALL = 66;
export const T_LEASE_MS = 68;
export const T_REFILL_TIMEOUT_MS = 69;
/**
 * How many inserts have been made (int32, wrapping; compared for equality only): each thread
 * records a key it found absent with the count it loaded before its probe, and counts it absent
 * while the count is unchanged. An inserter adds 1 after its insert is published, so an insert
 * published after a probe that missed it changes the count before any later load; one published
 * before the load is found by the probe. The record only spares the probe: a stale one (the
 * count wrapped around to the same value) can only hide a key, and a hidden key is asked of Redis.
 */
export const T_INSERTS = 70;
/**
 * The configuration the tier serves (LocalTier#claim): a 64-bit fingerprint of a limiter's prefix
 * and limits, 0 until the first limiter claims it. Words 72-73 (byte 288: 8-aligned for a
 * BigInt64 compare-and-exchange), in the header words a tier does not use for limits.
 */
export const T_CONFIG = 72;

/** State words per slot, and the offsets of the three 64-bit words (each lo, then hi). */
export const STATE_WORDS = 6;
export const REFUSAL = 0;
export const LEASE = 2;
export const REFILL = 4;

/** The 20-bit field of a word. */
export const FIELD_MASK = 0xfffff;
/** A lease word's field when the slot has had no lease. */
export const NONE = 0xfffff;
/** The most permits one lease holds. */
export const MAX_PERMITS = 0xffffe;
/** The longest refusal recorded, from its askedAt (17.5 minutes); a longer one is cut to it. */
export const MAX_REFUSAL_MS = 0xfffff;
/**
 * How long before a key's insert an answer for it may have been asked and still be recorded; a
 * slot is reclaimed only this long after its refusal ended.
 */
export const ANSWER_WINDOW_MS = 10_000;
/** Stamps are below this (the DEAD word's hi, -1, is above every stamp's). */
export const LIMIT_MS = 2 ** 44 - 4096;
export const DEAD_HI = -1;
export const DEAD_LO = 0;

/** The hi int32 of a word with stamp `ms`. */
export function hiOf(ms: number): number {
  return Math.floor(ms / 4096) | 0;
}

/** The lo int32 of a word with stamp `ms` and field `field`. */
export function loOf(ms: number, field: number): number {
  return ((ms % 4096) << 20) | field;
}

/** The stamp of the word (hi, lo). */
export function stampOf(hi: number, lo: number): number {
  return (hi >>> 0) * 4096 + (lo >>> 20);
}

/**
 * A clock reading as a stamp: whole ms, floored, or -1 when it cannot be stored (negative, or at
 * or above LIMIT_MS).
 */
export function stampAt(ms: number): number {
  const t = Math.floor(ms);
  return t >= 0 && t < LIMIT_MS ? t : -1;
}

/** clearAt: loaded lo, then hi, which gives at least the value it had at the first load. */
export function loadClearAt(w: Int32Array): number {
  // Atomics.load of lo, then hi: clearAt only increases, so a pair read across a raise is either
  // the old value or one above it (its hi is newer): never below the value at the first load.
  const lo = Atomics.load(w, T_CLEAR);
  const hi = Atomics.load(w, T_CLEAR + 1);
  return stampOf(hi, lo);
}

/**
 * Whether a lease word (hi, lo), not DEAD, is idle at the whole ms `now`: no lease and a start
 * strictly before now, or a lease that expired strictly before now (its count does not matter).
 */
export function leaseIdle(hi: number, lo: number, now: number, leaseMs: number): boolean {
  const stamp = stampOf(hi, lo);
  return (lo & FIELD_MASK) === NONE ? stamp < now : stamp + leaseMs < now;
}

/**
 * Reclaims the slot whose state starts at `at` if it is idle: its refusal ended more than
 * ANSWER_WINDOW_MS before now and its lease word is idle or already closed. Closes the lease
 * word first (compareExchange from the idle value to DEAD: offers can no longer land in this
 * occupant), then kills the refusal word (the table's marker, the linearisation point). When
 * the refusal changed in between, the slot lives on with its lease closed: takes and offers fail
 * there until the refusal is idle and a reclaim (or an offer helping one) completes. A lease
 * word found closed (a reclaimer stopped after closing it) is completed the same way.
 */
export function retireSlot(w: Int32Array, at: number, leaseMs: number, clock: Clock): number {
  // Atomics.load of each half; the compareExchanges below are from exactly the pairs read, so a
  // torn pair can only make them fail.
  const eHi = Atomics.load(w, at + REFUSAL + 1);
  if (eHi === DEAD_HI) return ALREADY_DEAD;
  const eLo = Atomics.load(w, at + REFUSAL);
  const lLo = Atomics.load(w, at + LEASE);
  const lHi = Atomics.load(w, at + LEASE + 1);
  // The clock after the loads: the reading is the `r` of the reuse argument above.
  const now = Math.floor(clock.now());
  if (!(stampOf(eHi, eLo) + (eLo & FIELD_MASK) + ANSWER_WINDOW_MS < now)) return NOT_IDLE;
  if (lHi !== DEAD_HI) {
    if (!leaseIdle(lHi, lLo, now, leaseMs)) return NOT_IDLE;
    // 64-bit compareExchange from the idle value: fails if an offer or take changed it.
    if (!cas64(w, at + LEASE, lHi, lLo, DEAD_HI, DEAD_LO)) return NOT_IDLE;
  }
  // 64-bit compareExchange from the idle refusal: fails if a refusal was written meanwhile.
  return cas64(w, at + REFUSAL, eHi, eLo, DEAD_HI, DEAD_LO) ? RETIRED : NOT_IDLE;
}

/**
 * The table hooks. A fresh slot: no refusal (one asked and ended ANSWER_WINDOW_MS before the
 * insert's reading), no lease (NONE, stamped at that reading), nobody refilling. Idle: see
 * `retireSlot`.
 */
export function tierSlotState(stateOffset: number, leaseMs: number, clock: Clock): SlotState {
  return {
    initSlot(w: Int32Array, base: number): void {
      // The reading after the table's claim (SlotState's contract): later than every stamp the
      // slot's previous occupant held (see Reuse above). A clock outside the storable range
      // (never performance.now()) is clamped; such a tier caches nothing.
      const t = Math.min(Math.max(Math.floor(clock.now()), 0), LIMIT_MS - 1);
      const fresh = Math.max(t - ANSWER_WINDOW_MS, 0);
      const at = base + stateOffset;
      // Atomics.store while the slot is BUSY: nobody reads its state before the publishing
      // compareExchange on ctrl, which orders these stores before it.
      Atomics.store(w, at + REFUSAL, loOf(fresh, 0));
      Atomics.store(w, at + REFUSAL + 1, hiOf(fresh));
      Atomics.store(w, at + LEASE, loOf(t, NONE));
      Atomics.store(w, at + LEASE + 1, hiOf(t));
      Atomics.store(w, at + REFILL, 0);
      Atomics.store(w, at + REFILL + 1, 0);
    },
    isDead(w: Int32Array, base: number): boolean {
      // Atomics.load: DEAD is written only by a reclaim's compareExchange, and never leaves.
      return Atomics.load(w, base + stateOffset + REFUSAL + 1) === DEAD_HI;
    },
    retire(w: Int32Array, base: number): number {
      // No reclaim floor: a fresh tier slot caches nothing, so its first check asks Redis, whose
      // clock decides (a reading behind a reclaim's changes no answer).
      return retireSlot(w, base + stateOffset, leaseMs, clock);
    },
    raiseTo(): void {},
  };
}

/** `refusalWrite` outcomes. */
export const WRITE = 0;
export const HELD = 1;
export const NOT_RECORDED = 2;

/**
 * What a refusal answer does to the refusal word (hi, lo) at the reading `now`: WRITE (the new
 * word is in `out`), HELD (the word already refuses at least as long, by a valid answer asked no
 * later), or NOT_RECORDED (the answer is void, already over, or older than the word's).
 * `askedAtMs` later than now counts as now; `untilMs` is cut to askedAt + MAX_REFUSAL_MS.
 */
export function refusalWrite(
  hi: number, lo: number, untilMs: number, askedAtMs: number, now: number, clearAt: number, out: Int32Array,
): number {
  const asked = stampAt(Math.min(askedAtMs, now));
  if (asked < 0 || asked < clearAt || stampAt(now) < 0) return NOT_RECORDED;
  const until = Math.min(Math.floor(untilMs), asked + MAX_REFUSAL_MS);
  if (until <= now) return NOT_RECORDED;
  const curStamp = stampOf(hi, lo);
  const curUntil = curStamp + (lo & FIELD_MASK);
  if (curStamp >= clearAt) {
    // A valid word: raised only by a longer refusal asked no earlier (never lowered).
    if (curUntil >= until) return HELD;
    if (asked < curStamp) return NOT_RECORDED;
  }
  out[0] = loOf(asked, until - asked);
  out[1] = hiOf(asked);
  return WRITE;
}
