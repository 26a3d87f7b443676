import type { Limit } from '../config/limit.js';
import { describe } from '../config/check.js';
import { fixedWindowAlgorithm } from './fixed-window.js';
import { gcraAlgorithm } from './gcra.js';
import { slidingLogAlgorithm } from './sliding-log.js';
import { slidingWindowAlgorithm } from './sliding-window.js';
import type { AlgorithmName, LimitAlgorithm } from './types.js';

export type { AlgorithmName, LimitAlgorithm, Moment, Verdict } from './types.js';

/** The algorithm names, in the order of their numeric ids in a table header. */
export const ALGORITHMS: readonly AlgorithmName[] = ['gcra', 'fixed-window', 'sliding-window', 'sliding-log'];

/** Throws unless `name` is a known algorithm; returns it. */
export function checkAlgorithm(name: unknown, argument: string): AlgorithmName {
  if (!ALGORITHMS.includes(name as AlgorithmName)) {
    throw new RangeError(`${argument} must be one of ${ALGORITHMS.map((a) => `'${a}'`).join(', ')}, got ${describe(name)}`);
  }
  return name as AlgorithmName;
}

/**
 * Compiles `limit` for `algorithm`. `wideGcra` gives GCRA limits a 64-bit state even when 32 bits
 * would hold them (PolicyLimiter, so that debt carries over any rule change). Throws
 * `TypeError`/`RangeError` naming `name`.
 */
export function compileLimit(algorithm: AlgorithmName, limit: Limit, name: string, maxLogSize: number, wideGcra = false, wideTickPs = 0): LimitAlgorithm {
  switch (algorithm) {
    case 'gcra': return gcraAlgorithm(limit, name, wideGcra ? 64 : 32, wideGcra ? wideTickPs : 0);
    case 'fixed-window': return fixedWindowAlgorithm(limit, name);
    case 'sliding-window': return slidingWindowAlgorithm(limit, name);
    case 'sliding-log': return slidingLogAlgorithm(limit, name, maxLogSize);
  }
}
