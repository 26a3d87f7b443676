import type { Clock } from '../time/clock.js';
import { describe, integerInRange } from '../config/check.js';
import { parseTableOptions, type TableOptions } from '../table/table-options.js';
import type { RateLimiterOptions, RateLimiterStats } from '../rate/types.js';
import { checkOptionsObject } from '../table/table-site.js';

/**
 * The local tier's options, handle and stats, and the checks of its arguments: each throws
 * before anything changes, naming the argument and the value it was given.
 */

/** Options for `LocalTier.create`. */
export interface LocalTierOptions
  extends Partial<Pick<RateLimiterOptions, 'slotsPerKey' | 'claimTimeoutMs' | 'hashSeed' | 'cacheSize' | 'forceHash'>> {
  /** Keys the table is sized for (default 10,000). */
  maxKeys?: number;
  /** Longest key in UTF-8 bytes (default 4,096; see RateLimiterOptions.maxKeyBytes); a longer key is simply not cached. */
  maxKeyBytes?: number;
  /** How long a lease's permits may be spent, counted from when they were asked for (default 1000). */
  leaseMs?: number;
  /** After this long another thread may take over a key's refill (default 1000). */
  refillTimeoutMs?: number;
  /** The tier's clock (default performance.now()): the timeline of every `...Ms` argument. */
  clock?: Clock;
}

/** What `attach` needs: its SharedArrayBuffers and a tag, so it survives structured cloning. */
export interface LocalTierHandle {
  readonly kind: 'sluice.LocalTier';
  readonly table: SharedArrayBuffer;
  /** The key heap that holds long keys past their slot's words, or null (maxKeyBytes <= 24). */
  readonly keys: SharedArrayBuffer | null;
  /** The clock's buffer when the tier runs on a ManualClock or a coarseClock(), else null. */
  readonly clock: SharedArrayBuffer | null;
}

/** `stats()`: the table (a snapshot, as RateLimiter's) and this instance's counters. */
export interface LocalTierStats extends Omit<RateLimiterStats, 'casRetries'> {
  /** Compare-and-swaps this instance lost to other threads. */
  casLosses: number;
  /**
   * Takes of this instance that spent permits but found, after their compare-and-swap, that the
   * lease had expired or been cleared: not admitted.
   */
  lateSpends: number;
}


/** A refill an instance holds: where its word is and the token it wrote there. */
export interface RefillToken { at: number; hi: number; lo: number }

const OPTION_NAMES = ['maxKeys', 'maxKeyBytes', 'leaseMs', 'refillTimeoutMs', 'clock', 'claimTimeoutMs', 'hashSeed', 'cacheSize', 'forceHash', 'slotsPerKey'];

export function badNumber(name: string, value: unknown): Error {
  if (typeof value !== 'number') return new TypeError(`${name} must be a number, got ${describe(value)}`);
  return new RangeError(`${name} must be a finite number, got ${describe(value)}`);
}

export function checkFinite(name: string, value: unknown): void {
  // x - x is 0 for every finite number and NaN for NaN and the infinities.
  if (typeof value !== 'number' || value - value !== 0) throw badNumber(name, value);
}


/** `create`'s options, checked: the table's, the lease and the refill timeout. */
export function parseTierOptions(options: LocalTierOptions): TableOptions & { leaseMs: number; refillTimeoutMs: number } {
  checkOptionsObject(options, OPTION_NAMES, 'LocalTier', '{ maxKeys, leaseMs }');
  const table = parseTableOptions({ ...options, maxKeys: options.maxKeys ?? 10_000 });
  const leaseMs = integerInRange('options.leaseMs', options.leaseMs ?? 1000, 1, 2 ** 30);
  const refillTimeoutMs = integerInRange('options.refillTimeoutMs', options.refillTimeoutMs ?? 1000, 1, 2 ** 30);
  return { ...table, leaseMs, refillTimeoutMs };
}

