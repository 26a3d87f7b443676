import type { Clock } from '../time/clock.js';
import { describe } from '../config/check.js';
import { isStale, secondsAt, unitsAhead } from '../time/stamps.js';
import { ceilTicks, ticksAt } from '../time/ticks.js';
import {
  DEAD, H_ALGORITHM, H_BURST, H_LIMITS_BYTE, H_STALE_SEC, H_TICK_NS, H_TOLERANCE_TICKS, LIVE, S_CTRL,
  S_LAST_SEC, S_TAT,
} from '../table/layout.js';
import { FREE, retireLocked, type LockAges } from '../table/slot-lock.js';
import type { SlotState, SlotTable } from '../table/table.js';
import type { ReclaimFloor } from '../table/reclaim-floor.js';

/**
 * A concurrency limiter's view of a slot: its parameters in the table header, the meaning of its
 * state words ("places"), and how a slot starts and goes idle.
 *
 * ```
 * one slot, as laid out by table/layout.ts, with maxInFlight + 1 state words:
 * +------+-----------+-----------+------+----------+---------+-----+-------------+-----------+-----+
 * | ctrl | tat: the  | lastSec:  | hash | keyBytes | place 0 | ... | place N-1   | floor     | key |
 * |      | key lock  | 2nd of    |      |          | FREE_PLACE (0), or the      | NO_FLOOR  |     |
 * |      | (slot-    | the last  |      |          | expiry of the lease holding | (0), or a |     |
 * |      | lock.ts)  | acquire   |      |          | it, in ticks mod 2^32       | reset's   |     |
 * +------+-----------+-----------+------+----------+---------+-----+-------------+-----------+-----+
 * ```
 *
 * A lease of cost c holds c places, each stamped with its expiry. A place is free when it holds
 * FREE_PLACE or a stamp that is not ahead of now, or a stamp at or below the floor while the floor
 * is ahead of now. The places are the limit: every write of a stamp is a compareExchange from a
 * free value, so at most maxInFlight places are held, whatever races.
 *
 * The floor is what `reset` writes: the latest stamp held when it ran, so that every lease taken
 * before it reads as expired at once, without touching their places. A lease stamps above the
 * floor (one tick past it at least), so the stamps of one place only ever grow and an old lease's
 * `release` (a compareExchange from its own stamp) never frees a later lease's place. Only a
 * holder of the key lock writes the floor, and clears it once it is no longer ahead of now; a
 * reset raises lastSec, so while the key is not stale the floor is recent enough to decode.
 *
 * Header words reused from the rate limiter's layout (their names there, their meaning here):
 * H_BURST = maxInFlight, H_TOLERANCE_TICKS = lease in ticks, H_TICK_NS = the tick, H_STALE_SEC =
 * staleSec below, H_ALGORITHM = CONCURRENCY_TABLE, and the float64 at H_LIMITS_BYTE = leaseMs.
 *
 * Stamps are ticks modulo 2^32, the lease at most 2^29 of them: an unexpired stamp decodes
 * exactly, and an expired one either decodes as expired or belongs to a key idle for longer than
 * `staleSec`, which frees every place (docs/design.md, section 7, "Wrap-around").
 *
 * Thread-safety: pure functions over shared words; safe on any thread.
 */

/** The `H_ALGORITHM` id of a concurrency table; `RateLimiter.attach` refuses it as unknown. */
export const CONCURRENCY_TABLE = 256;
/** A place no lease holds. A stamp that would equal it is stored one tick later. */
export const FREE_PLACE = 0;
/** The floor word of a key never reset (or whose reset is past). A floor that would equal it is stored one tick later. */
export const NO_FLOOR = 0;
/** The most places per key. */
export const MAX_IN_FLIGHT = 1024;

const MIN_TICK_NS = 1_000;
const MAX_TICK_NS = 1e9;
const MAX_LEASE_TICKS = 2 ** 29;
/** The longest lease: 2^29 ticks of the coarsest tick (about 17 years). */
export const MAX_LEASE_MS = (MAX_LEASE_TICKS * MAX_TICK_NS) / 1e6;

/** A concurrency limiter's parameters, as stored in its table header. */
export interface LeaseParams {
  /** Places per key. */
  maxInFlight: number;
  /** The lease duration as given. */
  leaseMs: number;
  /** The tick in picoseconds: 10^6 (1 us), 10^7, ... (the header keeps it in ns). */
  tickPs: number;
  /** `leaseMs` in ticks, rounded up; at most 2^29. */
  leaseTicks: number;
  /** A key whose last acquire is older than this many whole seconds holds no lease. */
  staleSec: number;
}

/** Chooses the tick for a lease of `leaseMs` (already checked positive and finite). */
export function leaseParams(maxInFlight: number, leaseMs: number): LeaseParams {
  for (let tickNs = MIN_TICK_NS; tickNs <= MAX_TICK_NS; tickNs *= 10) {
    const tickPs = tickNs * 1000;
    const leaseTicks = Math.max(1, ceilTicks((leaseMs * 1e9) / tickPs));
    if (leaseTicks > MAX_LEASE_TICKS) continue;
    const staleSec = Math.ceil((leaseTicks * tickNs) / 1e9) + 2;
    return { maxInFlight, leaseMs, tickPs, leaseTicks, staleSec };
  }
  throw new RangeError(`options.leaseMs must be at most ${MAX_LEASE_MS} (about 17 years), got ${describe(leaseMs)}`);
}

/** Writes the parameters into a new table's header (not yet shared: plain writes). */
export function writeLeaseParams(w: Int32Array, p: LeaseParams): void {
  w[H_ALGORITHM] = CONCURRENCY_TABLE;
  w[H_BURST] = p.maxInFlight;
  w[H_TOLERANCE_TICKS] = p.leaseTicks;
  w[H_TICK_NS] = p.tickPs / 1000;
  w[H_STALE_SEC] = p.staleSec;
  new Float64Array(w.buffer, H_LIMITS_BYTE, 1)[0] = p.leaseMs;
}

/** Reads the parameters back; throws `TypeError` if the table is not a concurrency limiter's. */
export function readLeaseParams(w: Int32Array): LeaseParams {
  if (w[H_ALGORITHM] !== CONCURRENCY_TABLE) {
    throw new TypeError('handle is not a ConcurrencyLimiter handle (its table belongs to a RateLimiter)');
  }
  return {
    maxInFlight: w[H_BURST] as number,
    leaseMs: new Float64Array(w.buffer, H_LIMITS_BYTE, 1)[0] as number,
    tickPs: (w[H_TICK_NS] as number) * 1000,
    leaseTicks: w[H_TOLERANCE_TICKS] as number,
    staleSec: w[H_STALE_SEC] as number,
  };
}

/**
 * Ticks until `place` frees by expiry, 0 if it is free now. `now32` is now in ticks modulo 2^32;
 * `stale` is the lastSec rule of the header comment (every stamp of the slot has expired);
 * `floor` the slot's floor word (NO_FLOOR to count by expiry alone).
 */
export function heldFor(place: number, now32: number, stale: boolean, floor: number): number {
  if (place === FREE_PLACE || stale) return 0;
  const ahead = (place - now32) | 0;
  // At or below a floor still ahead of now: a lease taken before a reset (both within a lease of now).
  if (ahead <= 0 || (floor !== NO_FLOOR && ((floor - now32) | 0) > 0 && ((place - floor) | 0) <= 0)) return 0;
  return ahead;
}

/**
 * Counts the places of the slot at `base` held at `nowMs`, reading them without the lock: a
 * snapshot (stats and idle checks). Places first, then lastSec, as in a decision. `byFloor`:
 * places below a reset's floor count as free (stats); without it, only expiry frees a place (the
 * idle test of a reclaim: a key is reclaimed only once every stamp in it has expired, so that no
 * late release can meet a stamp of the slot's next key).
 */
export function countHeld(w: Int32Array, base: number, stateOffset: number, nowMs: number, p: LeaseParams, byFloor: boolean): number {
  const at = base + stateOffset;
  let now32 = ticksAt(nowMs, p);
  // Atomics.load of the floor first: written under the key lock, read here as a snapshot.
  const floor = byFloor ? Atomics.load(w, at + p.maxInFlight) : NO_FLOOR;
  let held = 0;
  // Atomics.load of each place: a stamp seen here had lastSec raised before it was written.
  for (let i = 0; i < p.maxInFlight; i++) if (heldFor(Atomics.load(w, at + i), now32, false, floor) > 0) held++;
  // Atomics.load of lastSec after the places: at least the second of every stamp seen above.
  const lastSec = Atomics.load(w, base + S_LAST_SEC);
  const nowSec = secondsAt(nowMs);
  const ahead = unitsAhead(nowSec, lastSec);
  if (ahead !== 0) {
    // The stamp is ahead of the reading: the clock stepped back behind an acquire. Count at the
    // start of the stamp's second, as a decision does (see Clock): Atomics.load of each place
    // again (a snapshot: a place read as held may since have been released, never the reverse
    // under the key lock that a reclaim holds).
    now32 = ticksAt((nowSec + ahead) * 1000, p);
    held = 0;
    for (let i = 0; i < p.maxInFlight; i++) if (heldFor(Atomics.load(w, at + i), now32, false, floor) > 0) held++;
    return held;
  }
  if (held === 0) return 0;
  return isStale(nowSec, lastSec, p.staleSec) ? 0 : held;
}

/** Places held over every live key of `table` at `nowMs`: a snapshot that may race with writers. */
export function placesHeldIn(table: SlotTable, stateOffset: number, nowMs: number, p: LeaseParams): number {
  const w = table.words;
  let held = 0;
  for (let slot = 0; slot < table.capacity; slot++) {
    const base = table.base(slot);
    // Atomics.load of ctrl, then the lock word: only LIVE keys not being reclaimed count.
    if ((Atomics.load(w, base + S_CTRL) & 3) !== LIVE || Atomics.load(w, base + S_TAT) === DEAD) continue;
    held += countHeld(w, base, stateOffset, nowMs, p, true);
  }
  return held;
}

/**
 * The table hooks: a fresh slot has every place free; a key is idle (reclaimable) when it holds
 * no place, judged under the key lock (`retireLocked`: taken only if free, or from a holder dead
 * or stalled for the table's reuseAfterMs), so no acquire can run between the idle check and the reclaim.
 * A reclaimed key's stamps all lie at or before now, and the slot's next key stamps now + lease
 * or later, so a late `release` (compareExchange from its own stamp) cannot hit the new key.
 */
export function leaseSlotState(
  p: LeaseParams, stateOffset: number, owner: number, ages: LockAges, clock: Clock, raiseTo: (ms: number) => void,
): SlotState {
  const idle = (w: Int32Array, base: number, floor: ReclaimFloor): boolean => {
    const nowMs = clock.now();
    if (countHeld(w, base, stateOffset, nowMs, p, false) !== 0) return false;
    floor.raise(nowMs); // before the reclaim: its key comes back fresh at no earlier reading
    return true;
  };
  return {
    initSlot(w, base) {
      // Stores while the slot is BUSY: nobody reads its state before the publishing
      // compareExchange on ctrl, which orders these writes before it.
      for (let i = 0; i < p.maxInFlight; i++) Atomics.store(w, base + stateOffset + i, FREE_PLACE);
      Atomics.store(w, base + stateOffset + p.maxInFlight, NO_FLOOR);
      Atomics.store(w, base + S_LAST_SEC, secondsAt(clock.now()));
      Atomics.store(w, base + S_TAT, FREE);
    },
    isDead(w, base) {
      return Atomics.load(w, base + S_TAT) === DEAD; // the lock word holds the reclaim marker
    },
    retire(w, base, floor) {
      // The clock after the lock: later than every acquire's reading, so stamps decode exactly.
      return retireLocked(w, base, owner, ages, idle, floor);
    },
    raiseTo,
  };
}
