/**
 * `sluice stress`: hammers one limiter from N worker threads for T seconds on the real clock and
 * checks that no key was admitted more than its algorithm permits in the time that passed.
 *
 * Thread-safety: main thread only; the workers are `hammer-worker.ts`.
 */
import { ALGORITHMS, type AlgorithmName } from '../algorithms/index.js';
import type { Limit } from '../config/limit.js';
import { RateLimiter, type RateLimiterOptions } from '../rate/rate-limiter.js';
import {
  checkLimiter, formatRate, parseInteger, parseOptions, parseRate, parseSeconds, stringOption,
} from './args.js';
import { mostAdmitted } from './bounds.js';
import { hammer, type LiveView } from './hammer.js';
import { fmt, print, startProgress, table, wrap } from './output.js';
import { show, STRESS_USAGE, UsageError } from './usage.js';

const OPTIONS = {
  workers: { type: 'string' },
  seconds: { type: 'string' },
  limit: { type: 'string' },
  burst: { type: 'string' },
  algorithm: { type: 'string' },
  keys: { type: 'string' },
} as const;

/** The checked options of a stress run. */
interface StressPlan {
  workers: number;
  durationMs: number;
  options: RateLimiterOptions;
  keys: string[];
}

/** The largest sliding log the library takes (`maxLogSize`): permits up to this work. */
const MAX_LOG_SIZE = 65_536;
/** Most log words (4 bytes each) across all keys: 64 MiB. */
const MAX_LOG_WORDS = 2 ** 24;

/** Most keys listed in the verdict table; the verdict line counts them all. */
const SHOWN_KEYS = 10;

function plan(argv: readonly string[]): StressPlan | null {
  const args = parseOptions(argv, OPTIONS);
  if (args.values.help === true) return null;
  const workers = parseInteger('--workers', stringOption(args, 'workers', '4'), 1, 64);
  const durationMs = parseSeconds('--seconds', stringOption(args, 'seconds', '2'), 3600) * 1000;
  const limitText = stringOption(args, 'limit', '100/s');
  const limit: Limit = parseRate('--limit', limitText);
  const algorithm = stringOption(args, 'algorithm', 'gcra') as AlgorithmName;
  if (!ALGORITHMS.includes(algorithm)) {
    throw new UsageError(`--algorithm must be one of ${ALGORITHMS.join(', ')}, got ${show(algorithm)}`);
  }
  if (args.values.burst !== undefined) {
    if (algorithm !== 'gcra') throw new UsageError('--burst applies only to --algorithm gcra');
    limit.burst = parseInteger('--burst', stringOption(args, 'burst', ''), 1, 2 ** 31);
  }
  const keyCount = parseInteger('--keys', stringOption(args, 'keys', '1'), 1, 10_000);
  const options: RateLimiterOptions = { limit, algorithm, maxKeys: keyCount, maxLogSize: MAX_LOG_SIZE };
  checkLimiter(options, limitText);
  if (algorithm === 'sliding-log' && keyCount * limit.permits > MAX_LOG_WORDS) {
    throw new UsageError(`--keys ${keyCount} with ${fmt(limit.permits)} permits each is too big for ` +
      `sliding-log (a word per permit per key); at most ${fmt(MAX_LOG_WORDS)} in all`);
  }
  return { workers, durationMs, options, keys: Array.from({ length: keyCount }, (_, i) => `key:${i}`) };
}

/** Runs `sluice stress`; resolves with the exit status. Throws `UsageError` on bad options. */
export async function runStress(argv: readonly string[]): Promise<number> {
  const p = plan(argv);
  if (p === null) {
    print(STRESS_USAGE);
    return 0;
  }
  const limiter = new RateLimiter(p.options);
  const limit = limiter.limit;
  const algorithm = limiter.algorithm;
  const burst = algorithm === 'gcra' ? ` (burst ${fmt(limit.burst)})` : '';
  print(...wrap(
    `sluice stress: ${p.workers} worker thread${p.workers === 1 ? '' : 's'} try ${p.keys.length === 1 ? '1 key' : `${fmt(p.keys.length)} keys`} ` +
      `for ${p.durationMs / 1000} s on one limiter: ${formatRate(limit)}${burst} per key, ${algorithm}.`,
  ), '');
  const progress = (view: LiveView): string => {
    let tried = 0;
    let allowed = 0;
    for (let k = 0; k < p.keys.length; k++) {
      const c = view.key(k);
      tried += c.tried;
      allowed += c.allowed;
    }
    const now = performance.now();
    const most = mostAdmitted(algorithm, limit, now - view.elapsedMs(), now).most * p.keys.length;
    return `  ${(view.elapsedMs() / 1000).toFixed(1)} s  tried ${fmt(tried)}  allowed ${fmt(allowed)} ` +
      `(at most ${fmt(most)} so far)`;
  };
  const run = await hammer({ handle: limiter.handle, workers: p.workers, keys: p.keys }, p.durationMs,
    (view) => startProgress(() => progress(view)));

  const bound = mostAdmitted(algorithm, limit, run.startMs, run.endMs);
  const elapsedSec = (run.endMs - run.startMs) / 1000;
  print(...wrap(
    `${run.interrupted ? 'Interrupted after' : 'Ran'} ${elapsedSec.toFixed(3)} s. Every admission fell inside ` +
      `that time, so no key may have more than ${bound.formula} = ${fmt(bound.most)}.`,
  ), '');

  const perKey = p.keys.map((key, k) => ({
    key,
    tried: run.workers.reduce((sum, w) => sum + (w.tried[k] ?? 0), 0),
    allowed: run.workers.reduce((sum, w) => sum + (w.allowed[k] ?? 0), 0),
  }));
  const total = (field: 'tried' | 'allowed'): number => perKey.reduce((sum, r) => sum + r[field], 0);
  print(...table(
    [{ title: 'worker', align: 'left' }, { title: 'tried', align: 'right' }, { title: 'allowed', align: 'right' },
      { title: 'retries', align: 'right' }],
    [
      ...run.workers.map((w, i) => [String(i), fmt(sum(w.tried)), fmt(sum(w.allowed)), fmt(w.casRetries)]),
      ['all', fmt(total('tried')), fmt(total('allowed')), fmt(run.workers.reduce((s, w) => s + w.casRetries, 0))],
    ],
  ), '');

  const over = perKey.filter((r) => r.allowed > bound.most);
  const shown = [...perKey].sort((a, b) => b.allowed - a.allowed).slice(0, SHOWN_KEYS);
  print(...table(
    [{ title: 'key', align: 'left' }, { title: 'tried', align: 'right' }, { title: 'allowed', align: 'right' },
      { title: 'at most', align: 'right' }, { title: 'verdict', align: 'left' }],
    shown.map((r) => [r.key, fmt(r.tried), fmt(r.allowed), fmt(bound.most), r.allowed > bound.most ? 'OVER' : 'ok']),
  ));
  if (perKey.length > shown.length) print(`  (the ${SHOWN_KEYS} most allowed of ${fmt(perKey.length)} keys)`);
  print('');
  if (over.length === 0) {
    print(`ok: no key was admitted more than ${algorithm} permits`);
    return 0;
  }
  print(...wrap(`VIOLATION: ${fmt(over.length)} of ${fmt(perKey.length)} keys were admitted more than ` +
    `${algorithm} permits (${fmt(bound.most)})`));
  return 1;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
