import type { Clock } from './clock.js';
import { secondsAt, ticksAt, type GcraParams } from './gcra.js';
import {
  DEAD, H_BURST, H_INTERVAL_TICKS, H_STALE_SEC, H_TICK_NS, H_TOLERANCE_TICKS, S_LAST_SEC, S_TAT,
} from './table/layout.js';
import { NOT_IDLE, type SlotState } from './table/table.js';

/**
 * GCRA's view of a slot: where its parameters sit in the header and how a slot starts and goes
 * idle. Shared by the limiter and by the benchmark variants, so all of them run the same math on
 * the same layout.
 *
 * Thread-safety: pure functions over shared words; safe on any thread.
 */

/** Writes GCRA parameters into a new table's header (before the buffer is shared). */
export function writeGcraParams(w: Int32Array, p: GcraParams): void {
  w[H_INTERVAL_TICKS] = p.intervalTicks;
  w[H_TOLERANCE_TICKS] = p.toleranceTicks;
  w[H_BURST] = p.burst;
  w[H_TICK_NS] = p.tickNs;
  w[H_STALE_SEC] = p.staleSec;
}

/** Reads GCRA parameters back from a table's header. */
export function readGcraParams(w: Int32Array): GcraParams {
  return {
    tickNs: w[H_TICK_NS] as number,
    intervalTicks: w[H_INTERVAL_TICKS] as number,
    toleranceTicks: w[H_TOLERANCE_TICKS] as number,
    burst: w[H_BURST] as number,
    staleSec: w[H_STALE_SEC] as number,
  };
}

/** The table hooks for GCRA slots: a fresh state on insert, and the idle test for reclaims. */
export function gcraSlotState(p: GcraParams, clock: Clock): SlotState {
  return {
    initSlot(w: Int32Array, base: number): void {
      const nowMs = clock.now();
      // Stores while the slot is BUSY: no other thread reads its state until the publishing
      // compareExchange on ctrl, which orders these writes before it.
      Atomics.store(w, base + S_TAT, ticksAt(nowMs, p) | 0);
      Atomics.store(w, base + S_LAST_SEC, secondsAt(nowMs));
    },
    idleTat(w: Int32Array, base: number): number {
      // tat, then clock, then lastSec: the same order and argument as a decision.
      const tat = Atomics.load(w, base + S_TAT);
      if (tat === DEAD) return DEAD; // already being reclaimed: the table finishes it
      const nowMs = clock.now();
      const lastSec = Atomics.load(w, base + S_LAST_SEC);
      const ahead = (tat - (ticksAt(nowMs, p) | 0)) | 0;
      // Strictly behind now (not equal): a new key's first tat, read after its claim, is then
      // later than every value this slot held, so a stale compareExchange can never match it.
      const idle = ahead < 0 || secondsAt(nowMs) - lastSec > p.staleSec;
      return idle ? tat : NOT_IDLE;
    },
  };
}
