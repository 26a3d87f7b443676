import { monotonicClock, type Clock } from '../time/clock.js';
import { describe, integerInRange } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import { SLAB, HASHED, MAX_SLOTS_PER_KEY, MIN_SLOTS_PER_KEY, SLOTS_PER_KEY } from './layout.js';
import { DEFAULT_CACHE_SIZE } from './slot-index.js';

/**
 * The options every limiter class shares (the table, the clock, the per-thread cache), checked
 * once here so that each class names and bounds them the same way.
 */
export interface TableOptions {
  maxKeys: number;
  maxKeyBytes: number;
  claimTimeoutMs: number;
  onFull: 'deny' | 'allow';
  hashSeed: number;
  forcedHash: number | undefined;
  clock: Clock;
  cacheSize: number;
  slotsPerKey: number;
  /** A test's own reuseAfterMs (REUSE_AFTER_MS_OPTION); undefined: the table's default. */
  reuseAfterMs: number | undefined;
  /** How keys find their slots (LAYOUT_OPTION; layout.ts, H_LAYOUT). */
  layout: typeof HASHED | typeof SLAB;
}

/** The table's part of every class's `attach` options (rate/types.ts adds the decision hook). */
export interface TableAttachOptions {
  /** Required when the limiter was created with a custom clock (functions cannot be cloned). */
  clock?: Clock;
  /** Per-thread key cache size, as in `RateLimiterOptions`. */
  cacheSize?: number;
}

/**
 * The longest key accepted unless configured otherwise. A slot holds 24 bytes of key; a longer
 * key keeps the rest in the table's key heap, which costs only the keys that use it.
 */
export const DEFAULT_MAX_KEY_BYTES = 4096;
/** The most `maxKeyBytes` may be. */
export const MAX_KEY_BYTES = 65_536;

/** Most keys a table may be sized for. */
export const MAX_KEYS = 2 ** 22;

/**
 * The longest `claimTimeoutMs`: one minute. Every age measured against it must fit the stamp it
 * is read from. Lock tokens carry ms modulo 2^20 (slot-lock.ts), read as ages up to 983,040 ms
 * (the rest is a stamp ahead of the reading), and the longest wait on one is `setRules`'s 10x
 * claimTimeoutMs: 600,000 ms, inside that. Claim stamps (table.ts)
 * are read up to 30x claimTimeoutMs (1,800,000 ms), inside their 2^28 ms signed range.
 */
export const MAX_CLAIM_TIMEOUT_MS = 60_000;

/**
 * A table's reuseAfterMs (insert.ts, REUSE_AFTER_TIMEOUTS), as an option keyed by this symbol:
 * for tests that stage a stall past it in real time, which at the default (30 s at least) they
 * cannot wait for. Not part of the published options; from 1 ms to 30 minutes.
 */
export const REUSE_AFTER_MS_OPTION: unique symbol = Symbol.for('sluice.reuseAfterMs');

/**
 * The table layout (layout.ts, H_LAYOUT), as an option keyed by this symbol: 'slab' or 'hashed'.
 * Not part of the published options while the SLAB layout is being proven; the environment
 * variable SLUICE_TABLE_LAYOUT=slab makes it the default of a process (docs/testing.md).
 */
export const LAYOUT_OPTION: unique symbol = Symbol.for('sluice.layout');

/** The layout of a table whose options name none: HASHED, or what SLUICE_TABLE_LAYOUT says. */
const DEFAULT_LAYOUT = ((): typeof HASHED | typeof SLAB => {
  try {
    return globalThis.process?.env?.['SLUICE_TABLE_LAYOUT'] === 'slab' ? SLAB : HASHED;
  } catch {
    return HASHED; // a runtime that does not let us read the environment
  }
})();

/**
 * Checks the shared options; throws `TypeError`/`RangeError` naming `options.<name>` and the
 * value.
 */
export function parseTableOptions(options: {
  maxKeys?: unknown; maxKeyBytes?: unknown; claimTimeoutMs?: unknown; onFull?: unknown;
  hashSeed?: unknown; forceHash?: unknown; clock?: unknown; cacheSize?: unknown; slotsPerKey?: unknown;
}): TableOptions {
  const maxKeys = integerInRange('options.maxKeys', options.maxKeys, 1, MAX_KEYS);
  const maxKeyBytes = integerInRange('options.maxKeyBytes', options.maxKeyBytes ?? DEFAULT_MAX_KEY_BYTES, 1, MAX_KEY_BYTES);
  const claimTimeoutMs = integerInRange('options.claimTimeoutMs', options.claimTimeoutMs ?? 1000, 1, MAX_CLAIM_TIMEOUT_MS);
  const onFull = options.onFull ?? 'deny';
  if (onFull !== 'deny' && onFull !== 'allow') {
    throw new RangeError(`options.onFull must be 'deny' or 'allow', got ${describe(onFull)}`);
  }
  const hashSeed = options.hashSeed === undefined
    ? (Math.random() * 2 ** 32) | 0
    : integerInRange('options.hashSeed', options.hashSeed, -(2 ** 31), 2 ** 32 - 1) | 0;
  const forcedHash = options.forceHash === undefined
    ? undefined
    : integerInRange('options.forceHash', options.forceHash, -(2 ** 31), 2 ** 32 - 1) | 0;
  const clock = options.clock === undefined ? monotonicClock : checkClock(options.clock);
  const cacheSize = integerInRange('options.cacheSize', options.cacheSize ?? DEFAULT_CACHE_SIZE, 0, 2 ** 24);
  const slotsPerKey = options.slotsPerKey ?? SLOTS_PER_KEY;
  if (typeof slotsPerKey !== 'number') throw new TypeError(`options.slotsPerKey must be a number, got ${describe(slotsPerKey)}`);
  if (!(slotsPerKey >= MIN_SLOTS_PER_KEY && slotsPerKey <= MAX_SLOTS_PER_KEY)) {
    throw new RangeError(`options.slotsPerKey must be from ${MIN_SLOTS_PER_KEY} to ${MAX_SLOTS_PER_KEY}, got ${describe(slotsPerKey)}`);
  }
  const ownReuse = (options as { [REUSE_AFTER_MS_OPTION]?: unknown })[REUSE_AFTER_MS_OPTION];
  const reuseAfterMs = ownReuse === undefined ? undefined : integerInRange('options[sluice.reuseAfterMs]', ownReuse, 1, MAX_CLAIM_TIMEOUT_MS * 30);
  const ownLayout = (options as { [LAYOUT_OPTION]?: unknown })[LAYOUT_OPTION];
  if (ownLayout !== undefined && ownLayout !== 'slab' && ownLayout !== 'hashed') {
    throw new RangeError(`options[sluice.layout] must be 'slab' or 'hashed', got ${describe(ownLayout)}`);
  }
  const layout = ownLayout === undefined ? DEFAULT_LAYOUT : ownLayout === 'slab' ? SLAB : HASHED;
  return { maxKeys, maxKeyBytes, claimTimeoutMs, onFull, hashSeed, forcedHash, clock: clock as Clock, cacheSize, slotsPerKey, reuseAfterMs, layout };
}

/**
 * Checks a clock given in options: an object whose `now()` returns a finite number (read once
 * here, so that a clock that cannot tell the time fails at construction, not at the first check).
 */
export function checkClock(clock: unknown, name = 'options.clock'): Clock {
  if (clock === null || typeof clock !== 'object' || typeof (clock as Clock).now !== 'function') {
    throw new TypeError(`${name} must be an object with a now() method, got ${describe(clock)}`);
  }
  const t: unknown = (clock as Clock).now();
  if (typeof t !== 'number' || !Number.isFinite(t)) throw new TypeError(`${name}.now() must return a finite number, got ${describe(t)}`);
  return clock as Clock;
}

/**
 * Checks the options of every class's `attach`: undefined or an object of known names (the
 * table's, and `classNames`, which the class checks), `clock` a clock (read once, see
 * checkClock), `cacheSize` an integer from 0 to 2^24.
 */
export function checkAttachOptions(options: unknown, classNames: readonly string[] = []): TableAttachOptions & Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`attach() options must be an object like { clock, cacheSize }, got ${describe(options)}`);
  }
  checkNames(options, ['clock', 'cacheSize', ...classNames], 'options', 'attach() option');
  const { clock, cacheSize } = options as { clock?: unknown; cacheSize?: unknown };
  if (clock !== undefined) checkClock(clock);
  if (cacheSize !== undefined) integerInRange('options.cacheSize', cacheSize, 0, 2 ** 24);
  return options as TableAttachOptions & Record<string, unknown>;
}
