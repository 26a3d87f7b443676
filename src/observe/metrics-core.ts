import { describe } from '../config/check.js';
import type { DecisionHook } from '../rate/decision-hook.js';
import type { TableGauges } from '../rate/types.js';
import { COLUMNS, DecisionCounts, REASONS, type DecisionCountsHandle } from './decision-counts.js';

/**
 * What every metrics adapter (prometheus.ts, opentelemetry.ts) shares: the decision counts every
 * thread writes (decision-counts.ts), the limiters watched for their table gauges, and the
 * counts read as growth since the last read. The adapters differ only in how they report.
 */

/** A limiter whose table the metrics can watch: RateLimiter, PolicyLimiter, ConcurrencyLimiter. */
export interface GaugeSource {
  gauges(): TableGauges;
}

/** Anything with a lag to report, such as a `coarseClock()`. */
export interface LaggingClock {
  readonly lagMs: number;
}

/** What a watched limiter reports: its table, and a coarse clock's lag if one was given. */
export interface Watched {
  readonly source: GaugeSource;
  readonly clock: LaggingClock | null;
}

/** The table gauges: the metric's name (without a prefix), its description and the field of `TableGauges`. */
export const TABLE_GAUGES = [
  ['live_keys', 'Keys holding a slot in the limiter\'s table (idle ones until reclaimed)', 'liveKeys'],
  ['tombstones', 'Reclaimed slots not yet reused or compacted', 'tombstones'],
  ['probe_mean', 'Slots a lookup of a live key probes, on average', 'probeMean'],
  ['max_keys', 'Keys the table was sized for', 'maxKeys'],
] as const;

/** A count's labels: the limiter, the outcome and the reason. */
export interface CountLabels {
  limiter: string;
  outcome: 'allowed' | 'refused';
  reason: string;
}

/**
 * The counts and the watched limiters of one adapter instance. On an attached instance (a
 * worker's) only the counts: it counts, and the thread that made the metrics reports.
 *
 * Thread-safety: one instance per thread; instances on many threads count into one buffer.
 */
export class MetricsCore {
  readonly counts: DecisionCounts;
  /** Null on an attached instance. */
  readonly watched: Map<string, Watched> | null;
  /** What `grown` has reported so far, per limiter (sums modulo 2^32). */
  readonly #reported: Uint32Array[];
  readonly #now = new Uint32Array(COLUMNS);

  private constructor(counts: DecisionCounts, watching: boolean) {
    this.counts = counts;
    this.watched = watching ? new Map() : null;
    this.#reported = counts.limiters.map(() => new Uint32Array(COLUMNS));
  }

  /** New counts for `limiters` in `maxThreads` rows (both checked), with limiters to watch. */
  static create(limiters: unknown, maxThreads: unknown): MetricsCore {
    return new MetricsCore(DecisionCounts.create(limiters, maxThreads), true);
  }

  /** Counts on this thread over the buffer of `handle` (made on another thread). */
  static attach(handle: DecisionCountsHandle): MetricsCore {
    return new MetricsCore(DecisionCounts.attach(handle), false);
  }

  /** The `onDecision` hook that counts under `limiter` (one of the names). */
  onDecision<Key>(limiter: string): DecisionHook<Key> {
    return this.counts.hook(limiter) as DecisionHook<Key>;
  }

  /**
   * Reports `source`'s table gauges under `limiter`, and the lag of `options.clock` if given;
   * watching a name again replaces what it watched. Every argument checked by name.
   */
  watch(limiter: string, source: GaugeSource, options: { clock?: LaggingClock }, adapter: string): void {
    if (this.watched === null) throw new TypeError(`watch() belongs to the ${adapter} that registered the metrics, not to an attached one`);
    if (!this.counts.limiters.includes(limiter)) {
      throw new TypeError(`limiter ${describe(limiter)} is not one of the metrics' limiters (${this.counts.limiters.join(', ')})`);
    }
    if (source === null || typeof source !== 'object' || typeof source.gauges !== 'function') {
      throw new TypeError(`source must be a limiter with gauges() (RateLimiter, PolicyLimiter, ConcurrencyLimiter), got ${describe(source)}`);
    }
    if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object like { clock }, got ${describe(options)}`);
    const clock = options.clock ?? null;
    if (clock !== null && (typeof clock !== 'object' || typeof clock.lagMs !== 'number')) {
      throw new TypeError(`options.clock must be a clock with lagMs (a coarseClock()), got ${describe(clock)}`);
    }
    this.watched.set(limiter, { source, clock });
  }

  /**
   * Calls `each(labels, by)` for every count that grew since the last call, by how much (a
   * count's words wrap at 2^32: the growth is their difference modulo 2^32, so the last call
   * must be less than 2^32 decisions of one kind on one limiter ago).
   */
  grown(each: (labels: CountLabels, by: number) => void): void {
    const now = this.#now;
    for (const [at, limiter] of this.counts.limiters.entries()) {
      this.counts.read(at, now);
      const last = this.#reported[at] as Uint32Array;
      for (let c = 0; c < COLUMNS; c++) {
        const by = ((now[c] as number) - (last[c] as number)) >>> 0;
        if (by === 0) continue;
        each({ limiter, outcome: c < REASONS.length ? 'refused' : 'allowed', reason: REASONS[c % REASONS.length] as string }, by);
      }
      last.set(now);
    }
  }
}
