/**
 * The most requests of cost 1 that one key may be admitted, by each algorithm, when every
 * admission happened at a clock reading in [startMs, endMs] (E = endMs - startMs). `sluice stress`
 * and `sluice demo` hold what the workers got against these.
 *
 * Each bound follows from what the algorithm checks before it admits, whatever the order in which
 * threads take their turns, and allows for how the limiter rounds clock readings (to ticks of
 * `tickNs`, see math/gcra.ts). Write P for permits, T for periodMs, B for burst.
 */
import type { AlgorithmName } from '../algorithms/index.js';
import { floorDiv } from '../time/ticks.js';
import { gcraParams } from '../math/gcra.js';
import type { Limit } from '../config/limit.js';
import { formatDuration, formatRate } from './args.js';
import { fmt } from './output.js';

/** A bound and how it was reached, for printing. */
export interface Bound {
  /** The most the key may have been admitted. */
  most: number;
  /** The formula with its numbers, e.g. `100 + 100 per s x 1.003 s`. */
  formula: string;
}

/** Absorbs float error in the products below, so a bound is never one too low. */
const EPSILON = 1e-9;

/** The most one key may be admitted in [startMs, endMs] under `algorithm` and `limit`. */
export function mostAdmitted(algorithm: AlgorithmName, limit: Required<Limit>, startMs: number, endMs: number): Bound {
  const elapsedMs = endMs - startMs;
  const { permits, periodMs, burst } = limit;
  switch (algorithm) {
    case 'gcra': {
      // GCRA admits at t only if tat - t <= (B - 1) * I, with I = T / P the emission interval,
      // and every admission moves tat to max(tat, t) + I. So after the first of n admissions
      // (at t1) tat >= t1 + I, after the (n-1)th tat >= t1 + (n-1) * I, and the nth (at tn)
      // needs t1 + (n-1) * I <= tn + (B-1) * I, that is n <= B + (tn - t1) / I <= B + E / I.
      // Readings are floored to whole ticks (and the guard in ticksAt may lift one by a tick),
      // so tn - t1 in ticks is at most E + 2 ticks; I is rounded up to whole ticks, which only
      // lowers the count, so the nominal I is safe to divide by.
      const tickMs = gcraParams(limit).tickNs / 1e6;
      const most = Math.floor(burst + ((elapsedMs + 2 * tickMs) * permits) / periodMs + EPSILON);
      return { most, formula: `burst ${fmt(burst)} + ${formatRate(limit)} x ${seconds(elapsedMs)}` };
    }
    case 'fixed-window':
    case 'sliding-window': {
      // Both count admissions per window [k * T, (k+1) * T) on the limiter's clock (window k =
      // floorDiv(ms, T)). Fixed window admits while count + 1 <= P. Sliding window admits while
      // prev * weight + count + 1 <= P with weight >= 0, so also count + 1 <= P: at most P
      // per window for both (the sliding window's 1.5 P appears only across a boundary). The
      // windows an admission in [startMs, endMs] can fall in are floorDiv(startMs, T) to
      // floorDiv(endMs, T), as floorDiv never decreases: P times that many windows.
      const windows = floorDiv(endMs, periodMs) - floorDiv(startMs, periodMs) + 1;
      return { most: permits * windows, formula: `${fmt(permits)} x ${fmt(windows)} windows touched` };
    }
    case 'sliding-log': {
      // The log admits only while fewer than P admissions are younger than T, so no half-open
      // span of T (in ticks) holds more than P stamps. Stamps are floored readings, at most 2
      // ticks later than the reading (guard, and the empty-marker nudge), so they lie on at most
      // E + 4 integer ticks; spans of T cover those in ceil((E + 4 ticks) / T) spans.
      const tickMs = gcraParams({ permits: 1, periodMs, burst: 1 }).tickNs / 1e6;
      const spans = Math.ceil((elapsedMs + 4 * tickMs) / periodMs);
      return { most: permits * spans, formula: `${fmt(permits)} x ceil(${seconds(elapsedMs)} / ${formatDuration(periodMs)})` };
    }
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(3)} s`;
}
