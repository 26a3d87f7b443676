import { ALGORITHMS, checkAlgorithm, compileLimit, type AlgorithmName } from '../algorithms/index.js';
import { describe, integerInRange } from '../config/check.js';
import { blockTickPs, gcraParams, maxBlockMsOf, READING_LAG_MS, wideTickHolding, type GcraParams } from '../math/gcra.js';
import { validateLimit, type Limit } from '../config/limit.js';
import { group, type LimitGroup } from './limit-set.js';
import {
  H_ALGORITHM, H_BLOCK_SEC, H_HAS_GLOBAL, H_LIMIT_COUNT, H_LIMITS_BYTE, H_MAX_LOG_SIZE, H_WIDE_TICK, H_WIDTH, H_WINDOW_BLOCK, MAX_LIMITS,
} from '../table/layout.js';
import { BlockUntil } from '../algorithms/block-until.js';

/**
 * What a limiter enforces, as stored in its table header so that `attach` rebuilds exactly the
 * same limiter in every thread.
 */
export interface LimiterConfig {
  algorithm: AlgorithmName;
  limits: Required<Limit>[];
  globalLimit: Required<Limit> | null;
  maxLogSize: number;
  /**
   * The one-limit GCRA path's least width: 64 when `maxBlockMs` needs it (32 cannot hold such a
   * block), else 32. Kept in the header (H_WIDTH), so that `attach` takes the same.
   */
  minWidth?: 32 | 64;
  /**
   * The width-64 tick `maxBlockMs` chose when the limit's own is too fine for such a block (ps);
   * 0 or absent: the limit's own. Kept in the header (H_WIDE_TICK) for `attach`.
   */
  wideTickPs?: number;
  /**
   * Windows made with `maxBlockMs`: every key keeps a block word after its limits (BlockUntil,
   * algorithms/block-until.ts), which `block` raises. Kept in the header (H_WINDOW_BLOCK).
   */
  windowBlock?: boolean;
  /**
   * PolicyLimiter's GCRA rules (64-bit states) made with `maxBlockMs`: each limit's tick, chosen
   * to hold such a block (math/gcra.ts wideTickHolding); absent: each limit's own.
   */
  ruleTicksPs?: readonly number[];
  /**
   * A RateLimiter's several GCRA limits whose own ticks cannot hold `maxBlockMs`: that block in
   * whole seconds, from which each limit's tick is chosen (`ruleTicksPs`). Kept in the header
   * (H_BLOCK_SEC) for `attach`.
   */
  blockSec?: number;
}

/** The compiled form: the lock-free GCRA parameters, or the locked groups. */
export interface CompiledConfig {
  /** Set when the key has one GCRA limit and there is no global cap: the lock-free path (at its width). */
  fast: GcraParams | null;
  key: LimitGroup;
  global: LimitGroup | null;
}

/** Default bound on a sliding log's permits (4 bytes each per key). */
export const DEFAULT_MAX_LOG_SIZE = 1_000;

/** Checks the limit-related options; throws `TypeError`/`RangeError` naming the option. */
export function parseConfig(options: {
  limit: Limit | readonly Limit[];
  algorithm?: AlgorithmName | undefined;
  globalLimit?: Limit | undefined;
  maxLogSize?: number | undefined;
  maxBlockMs?: number | undefined;
}): LimiterConfig {
  const algorithm = checkAlgorithm(options.algorithm ?? 'gcra', 'options.algorithm');
  const maxLogSize = integerInRange('options.maxLogSize', options.maxLogSize ?? DEFAULT_MAX_LOG_SIZE, 1, 65_536);
  const list = Array.isArray(options.limit) ? options.limit : [options.limit];
  if (Array.isArray(options.limit) && (list.length === 0 || list.length > MAX_LIMITS)) {
    throw new RangeError(`options.limit must hold 1 to ${MAX_LIMITS} limits, got ${list.length}`);
  }
  const limits = list.map((l, i) => validateLimit(l, Array.isArray(options.limit) ? `options.limit[${i}]` : 'options.limit'));
  const globalLimit = options.globalLimit === undefined ? null : validateLimit(options.globalLimit, 'options.globalLimit');
  const config: LimiterConfig = { algorithm, limits, globalLimit, maxLogSize };
  const compiled = compileConfig(config, true); // throws now, naming the limit, for what only the algorithm can check
  const maxBlockMs: unknown = options.maxBlockMs;
  if (maxBlockMs !== undefined) {
    if (typeof maxBlockMs !== 'number') throw new TypeError(`options.maxBlockMs must be a number of ms, got ${describe(maxBlockMs)}`);
    if (!(maxBlockMs >= 0 && maxBlockMs <= MAX_BLOCK_MS)) throw new RangeError(`options.maxBlockMs must be 0 to 2^53 ms, got ${describe(maxBlockMs)}`);
    Object.assign(config, compiled.fast === null ? limitsBlockState(maxBlockMs, config) : blockState(maxBlockMs, compiled.fast, limits[0] as Limit));
  }
  return config;
}

/** The longest block `options.maxBlockMs` may ask for: 30 days and more, at any limit that holds it. */
const MAX_BLOCK_MS = 2 ** 53;

/**
 * The longest block (`RateLimiter.block`) every key limit of a config without the one-limit path
 * holds, in ms, at the width its GCRA states take (64 when `minWidth` says so): each limit's
 * horizon, kept as far inside as a decision's reading may lag (READING_LAG_MS, and two ticks of
 * rounding), less its tolerance plus one interval. Windows: their block word's (BlockUntil) when
 * they keep one, else 0; 0 for the sliding log.
 */
export function limitsMaxBlockMs(config: LimiterConfig): number {
  if (config.algorithm !== 'gcra') return config.windowBlock === true ? BlockUntil.MAX_BLOCK_MS : 0;
  const width = config.minWidth ?? 32;
  return Math.max(0, Math.min(...config.limits.map((l, i) => {
    const p = gcraParams(l, 'limit', width, width === 64 ? config.ruleTicksPs?.[i] ?? 0 : 0);
    return maxBlockMsOf(p) - READING_LAG_MS - (2 * p.tickPs) / 1e9;
  })));
}

/**
 * `blockState` for several GCRA limits (or one under a global cap): their states at width 64
 * when 32 cannot hold a block of `maxBlockMs`; each limit keeps its own tick. Fixed and sliding
 * windows: a block word per key (BlockUntil). TypeError for the sliding log; RangeError when no
 * width holds it.
 */
function limitsBlockState(maxBlockMs: number, config: LimiterConfig): Pick<LimiterConfig, 'minWidth' | 'windowBlock' | 'ruleTicksPs' | 'blockSec'> {
  if (config.algorithm === 'sliding-log') {
    throw new TypeError("options.maxBlockMs is for block(), which a sliding log does not hold (its state is its admissions' stamps, not a block's end); " +
      "this limiter runs 'sliding-log'");
  }
  if (config.algorithm !== 'gcra') {
    if (maxBlockMs > BlockUntil.MAX_BLOCK_MS) {
      throw new RangeError(`options.maxBlockMs ${maxBlockMs} is longer than a window key's block word holds (at most ${BlockUntil.MAX_BLOCK_MS} ms)`);
    }
    return { windowBlock: true };
  }
  if (limitsMaxBlockMs(config) >= maxBlockMs) return {};
  const wide = limitsMaxBlockMs({ ...config, minWidth: 64 });
  if (wide >= maxBlockMs) return { minWidth: 64 };
  // A limit too fast for such a block at its own tick takes a coarser one (as PolicyLimiter's
  // rules do), chosen from the block in whole seconds, which the header keeps for `attach`.
  const blockSec = Math.ceil(maxBlockMs / 1000);
  const ruleTicksPs = ruleTicksFor(config.limits, blockSec);
  const held = limitsMaxBlockMs({ ...config, minWidth: 64, ruleTicksPs });
  if (held < maxBlockMs) throw new RangeError(`options.maxBlockMs ${maxBlockMs} is longer than these limits' states can hold (at most ${held} ms)`);
  return { minWidth: 64, ruleTicksPs, blockSec };
}

/**
 * Each limit's 64-bit tick for a block of `blockSec` seconds: its own when that holds it, else the
 * coarsest needed (wideTickHolding, with the reading's lag as margin). `RangeError` naming the
 * limit when none does.
 */
function ruleTicksFor(limits: readonly Limit[], blockSec: number): number[] {
  return limits.map((l, i) => wideTickHolding(l, limits.length > 1 ? `options.limit[${i}]` : 'options.limit', blockSec * 1000 + READING_LAG_MS + 1));
}

/**
 * The width (and, at 64, the tick) whose state holds a block of `maxBlockMs` (RateLimiter.block)
 * under the one-limit GCRA path's parameters `fast`: nothing new when they already do.
 * `RangeError` when no width holds it.
 */
function blockState(maxBlockMs: number, fast: GcraParams, limit: Limit): Pick<LimiterConfig, 'minWidth' | 'wideTickPs'> {
  if (maxBlockMsOf(fast) >= maxBlockMs) return {};
  const wide = fast.width === 64 ? fast : gcraParams(limit, 'options.limit', 64);
  if (maxBlockMsOf(wide) >= maxBlockMs) return { minWidth: 64 };
  const tickPs = blockTickPs(limit, maxBlockMs);
  // Kept in tenths of a ps in one int32 header word (writeConfig): ticks of 1 us or less.
  if (tickPs === 0 || tickPs > 1e6) throw new RangeError(`options.maxBlockMs ${maxBlockMs} is longer than this limit's state can hold at any width`);
  return { minWidth: 64, wideTickPs: tickPs };
}

/**
 * Compiles a config. `named` makes errors name the options (at construction); a string names the
 * limits after it (`rules[2].limit[0]`).
 */
export function compileConfig(config: LimiterConfig, named: boolean | string = false, wideGcra = false, baseParity = 0): CompiledConfig {
  const prefix = typeof named === 'string' ? named : 'options.limit';
  const name = (i: number): string => (!named ? 'limit' : config.limits.length > 1 ? `${prefix}[${i}]` : prefix);
  const oneLimit = config.algorithm === 'gcra' && config.limits.length === 1 && config.globalLimit === null;
  // Several limits (or one under a cap) whose blocks need 64 bits (maxBlockMs): wide GCRA states.
  const wide = wideGcra || (!oneLimit && config.minWidth === 64);
  const limits = config.limits.map((l, i) => compileLimit(config.algorithm, l, name(i), config.maxLogSize, wide, config.ruleTicksPs?.[i] ?? 0));
  // Windows made with maxBlockMs: the key's block word, a limit of its own after the others.
  const key = group(config.windowBlock === true ? [...limits, new BlockUntil()] : limits, baseParity);
  const global = config.globalLimit === null
    ? null
    : group([compileLimit(config.algorithm, config.globalLimit, named ? 'options.globalLimit' : 'globalLimit', config.maxLogSize)]);
  const first = config.limits[0] as Limit;
  const fast = oneLimit ? gcraParams(first, 'limit', config.minWidth ?? 32, config.wideTickPs ?? 0) : null;
  return { fast, key, global };
}

/**
 * Where a key's give-back epoch word sits from the start of its state words, for the
 * configurations of the lock-free engine (every one off the one-limit GCRA path but the sliding
 * log), whose give-backs run beside undos (rate/give-back-guard.ts): after the limits' words. -1
 * for the others, which keep none.
 */
export function epochOffsetOf(compiled: CompiledConfig): number {
  return compiled.fast === null && compiled.key.lockFree && compiled.global?.lockFree !== false ? compiled.key.words : -1;
}

/** Writes a config into a new table's header (not yet shared: plain writes). */
export function writeConfig(w: Int32Array, config: LimiterConfig, compiled: CompiledConfig): void {
  w[H_ALGORITHM] = ALGORITHMS.indexOf(config.algorithm);
  w[H_LIMIT_COUNT] = config.limits.length;
  w[H_HAS_GLOBAL] = config.globalLimit === null ? 0 : 1;
  w[H_MAX_LOG_SIZE] = config.maxLogSize;
  w[H_WIDTH] = compiled.fast?.width ?? (config.minWidth === 64 ? 64 : 0);
  // In tenths of a ps: every tick of width 64 up to 1 us is a whole number of them (WIDE_TICKS_PS).
  w[H_WIDE_TICK] = Math.round((config.wideTickPs ?? 0) * 10);
  w[H_WINDOW_BLOCK] = config.windowBlock === true ? 1 : 0;
  w[H_BLOCK_SEC] = config.blockSec === undefined ? 0 : config.blockSec + 1;
  const f = new Float64Array(w.buffer, H_LIMITS_BYTE, (MAX_LIMITS + 1) * 3);
  [...config.limits, ...(config.globalLimit ? [config.globalLimit] : [])].forEach((l, i) => {
    f[i * 3] = l.permits;
    f[i * 3 + 1] = l.periodMs;
    f[i * 3 + 2] = l.burst;
  });
}

/** Reads a config back from a table header. */
export function readConfig(w: Int32Array): LimiterConfig {
  const f = new Float64Array(w.buffer, H_LIMITS_BYTE, (MAX_LIMITS + 1) * 3);
  const at = (i: number): Required<Limit> => ({ permits: f[i * 3] as number, periodMs: f[i * 3 + 1] as number, burst: f[i * 3 + 2] as number });
  const count = w[H_LIMIT_COUNT] as number;
  const algorithm = ALGORITHMS[w[H_ALGORITHM] as number];
  if (algorithm === undefined) throw new TypeError(`handle holds an unknown algorithm id ${describe(w[H_ALGORITHM])}`);
  const limits = Array.from({ length: count }, (_, i) => at(i));
  const config: LimiterConfig = {
    algorithm,
    limits,
    globalLimit: w[H_HAS_GLOBAL] === 1 ? at(count) : null,
    maxLogSize: w[H_MAX_LOG_SIZE] as number,
    minWidth: w[H_WIDTH] === 64 ? 64 : 32,
    wideTickPs: (w[H_WIDE_TICK] as number) / 10,
    windowBlock: w[H_WINDOW_BLOCK] === 1,
  };
  // The ticks its maker chose for maxBlockMs, chosen again from the same whole seconds.
  const blockSec = (w[H_BLOCK_SEC] as number) - 1;
  if (blockSec >= 0) Object.assign(config, { blockSec, ruleTicksPs: ruleTicksFor(limits, blockSec) });
  return config;
}

