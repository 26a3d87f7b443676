/**
 * `sluice simulate`: replays one client, trying once every X for D from time S, against each of
 * the four algorithms on a ManualClock, and prints how many requests each allowed and the most it
 * allowed in any span as long as the limit's period.
 *
 * Thread-safety: main thread only; runs synchronously on one thread.
 */
import type { AlgorithmName } from '../algorithms/index.js';
import { ManualClock } from '../time/clock.js';
import type { Limit } from '../config/limit.js';
import { RateLimiter } from '../rate/rate-limiter.js';
import {
  checkLimiter, formatDuration, formatRate, parseDuration, parseInteger, parseOptions, parseRate, stringOption,
} from './args.js';
import { fmt, print, table, wrap } from './output.js';
import { SIMULATE_USAGE, UsageError } from './usage.js';

const OPTIONS = {
  limit: { type: 'string' },
  every: { type: 'string' },
  for: { type: 'string' },
  start: { type: 'string' },
  burst: { type: 'string' },
} as const;

/** The algorithms in the order of the table: the loosest at the boundary first. */
const ORDER: readonly AlgorithmName[] = ['fixed-window', 'sliding-log', 'sliding-window', 'gcra'];

/** Most tries per algorithm, so a run stays within seconds. */
const MAX_TRIES = 2_000_000;
/** Most tries times permits: a sliding log reads one word per permit on every try. */
const MAX_LOG_WORK = 2e9;

/** A client's pattern: a try at startMs, startMs + everyMs, ... for `tries` tries. */
export interface Pattern {
  everyMs: number;
  startMs: number;
  tries: number;
}

/** What one algorithm made of the pattern. */
export interface Outcome {
  allowed: number;
  /** The most admissions in any half-open span of `periodMs`. */
  worst: number;
}

/** Replays `pattern` against a fresh limiter. Pure apart from its own limiter and clock. */
export function replay(algorithm: AlgorithmName, limit: Limit, pattern: Pattern): Outcome {
  const clock = new ManualClock(pattern.startMs);
  const limiter = new RateLimiter({ limit, algorithm, maxKeys: 1, clock, maxLogSize: 65_536 });
  const times: number[] = [];
  for (let i = 0; i < pattern.tries; i++) {
    const t = pattern.startMs + i * pattern.everyMs;
    clock.set(t);
    if (limiter.allow('client')) times.push(t);
  }
  let worst = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] as number) - (times[j] as number) >= limit.periodMs) j++;
    worst = Math.max(worst, i - j + 1);
  }
  return { allowed: times.length, worst };
}

/** Runs `sluice simulate`; returns the exit status. Throws `UsageError` on bad options. */
export function runSimulate(argv: readonly string[]): number {
  const args = parseOptions(argv, OPTIONS);
  if (args.values.help === true) {
    print(SIMULATE_USAGE);
    return 0;
  }
  const limitText = stringOption(args, 'limit', '100/min');
  const limit = parseRate('--limit', limitText);
  const everyMs = parseDuration('--every', stringOption(args, 'every', '10ms'), 0.001, 86_400_000);
  const forMs = parseDuration('--for', stringOption(args, 'for', '5m'), 0.001, 366 * 86_400_000);
  const startMs = parseDuration('--start', stringOption(args, 'start', '30s'), 0, 366 * 86_400_000);
  if (args.values.burst !== undefined) limit.burst = parseInteger('--burst', stringOption(args, 'burst', ''), 1, 2 ** 31);
  const tries = Math.ceil(forMs / everyMs - 1e-9);
  if (tries > MAX_TRIES) {
    throw new UsageError(`--for / --every makes ${fmt(tries)} tries; at most ${fmt(MAX_TRIES)} (try a longer --every)`);
  }
  if (tries * limit.permits > MAX_LOG_WORK) {
    throw new UsageError(`${fmt(tries)} tries at ${fmt(limit.permits)} permits would take minutes on the sliding log; ` +
      'try fewer tries (a longer --every or a shorter --for)');
  }
  // Window and log algorithms count whole requests and have no burst: they run the bare rate.
  const windowLimit: Limit = { permits: limit.permits, periodMs: limit.periodMs };
  for (const algorithm of ORDER) checkLimiter({ limit: algorithm === 'gcra' ? limit : windowLimit, algorithm, maxKeys: 1, maxLogSize: 65_536 }, limitText);

  const pattern: Pattern = { everyMs, startMs, tries };
  const burst = limit.burst ?? Math.max(1, Math.floor(limit.permits));
  const period = formatDuration(limit.periodMs);
  print(...wrap(
    `sluice simulate: one client tries every ${formatDuration(everyMs)} for ${formatDuration(forMs)} from ` +
      `${startMs === 0 ? '0' : formatDuration(startMs)} (${fmt(tries)} tries) against ${formatRate(limit)}, ` +
      `on a manual clock. GCRA has burst ${fmt(burst)}; the others have none.`,
  ), '');
  const rows = ORDER.map((algorithm) => {
    const o = replay(algorithm, algorithm === 'gcra' ? limit : windowLimit, pattern);
    return [algorithm, fmt(o.allowed), fmt(tries), fmt(o.worst), `${(o.worst / limit.permits).toFixed(2)}x`];
  });
  print(...table(
    [{ title: 'algorithm', align: 'left' }, { title: 'allowed', align: 'right' }, { title: 'tried', align: 'right' },
      { title: `most in any ${period}`, align: 'right' }, { title: 'of limit', align: 'right' }],
    rows,
  ));
  return 0;
}
