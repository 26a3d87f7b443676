import type { Clock } from '../time/clock.js';
import { isStale, secondsAt, unitsAhead } from '../time/stamps.js';
import { type GcraParams } from '../math/gcra.js';
import { ticksAt } from '../time/ticks.js';
import { DEAD, S_LAST_SEC, S_TAT } from '../table/layout.js';
import { ALREADY_DEAD, NOT_IDLE, RETIRED, type SlotState } from '../table/table.js';
import type { ReclaimFloor } from '../table/reclaim-floor.js';

/**
 * GCRA's view of a 32-bit slot: how a slot starts and goes idle. Shared by the limiter and by the
 * benchmark variants, so all of them run the same math on the same layout.
 *
 * Thread-safety: pure functions over shared words; safe on any thread.
 */

/** The first TAT of a fresh key at `nowMs`: now in ticks, never the reclaim marker. */
export function freshTat(nowMs: number, p: GcraParams): number {
  const tat = ticksAt(nowMs, p);
  return tat === DEAD ? DEAD + 1 : tat; // one tick later: conservative by a tick
}

/**
 * The table hooks for 32-bit GCRA slots: a fresh state on insert, and the idle test for reclaims.
 * A fresh state is written at the clock's own reading, or at the reclaim floor this instance was
 * told of (`raiseTo`) when that is later.
 */
export function gcraSlotState(p: GcraParams, clock: Clock): SlotState {
  let floorMs = -Infinity;
  return {
    initSlot(w: Int32Array, base: number): void {
      const rawMs = clock.now();
      const nowMs = rawMs >= floorMs ? rawMs : floorMs;
      // Stores while the slot is BUSY: no other thread reads its state until the publishing
      // compareExchange on ctrl, which orders these writes before it.
      Atomics.store(w, base + S_TAT, freshTat(nowMs, p));
      Atomics.store(w, base + S_LAST_SEC, secondsAt(nowMs));
    },
    isDead(w: Int32Array, base: number): boolean {
      return Atomics.load(w, base + S_TAT) === DEAD; // a reclaim's marker, written by compareExchange
    },
    retire(w: Int32Array, base: number, floor: ReclaimFloor): number {
      // tat, then lastSec, then the clock: the same order and argument as a decision.
      const tat = Atomics.load(w, base + S_TAT);
      if (tat === DEAD) return ALREADY_DEAD; // already being reclaimed: the table finishes it
      const lastSec = Atomics.load(w, base + S_LAST_SEC);
      const nowMs = clock.now();
      const nowSec = secondsAt(nowMs);
      // A stamp ahead of the reading: the clock stepped back behind the key's latest admission,
      // and the key is not idle (decisions raise their reading to the stamp; see Clock).
      if (unitsAhead(nowSec, lastSec) !== 0) return NOT_IDLE;
      const ahead = (tat - ticksAt(nowMs, p)) | 0;
      // Strictly behind now (not equal): a new key's first tat, read after its claim, is then
      // later than every value this slot held, so a stale compareExchange can never match it.
      // Stale: the 32-bit value may have wrapped. Ahead, however far, is debt (see debtOf).
      const idle = ahead < 0 || isStale(nowSec, lastSec, p.staleSec);
      if (!idle) return NOT_IDLE;
      floor.raise(nowMs); // before the reclaim: its key comes back fresh at no earlier reading
      // The linearisation point of a reclaim: tat goes from the idle value to DEAD. A request that
      // read the same value and tries to spend from it now fails its CAS and looks the key up again.
      return Atomics.compareExchange(w, base + S_TAT, tat, DEAD) === tat ? RETIRED : NOT_IDLE;
    },
    raiseTo(ms: number): void {
      if (ms > floorMs) floorMs = ms;
    },
  };
}
