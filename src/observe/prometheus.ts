import type { Counter, Gauge, Registry } from 'prom-client';
import { describe } from '../config/check.js';
import type { TableGauges } from '../rate/types.js';
import type { DecisionHook } from '../rate/decision-hook.js';
import { COLUMNS, DecisionCounts, REASONS, type DecisionCountsHandle } from './decision-counts.js';

/** What `SluiceMetrics.attach` takes in a worker: `metrics.handle`, structured-cloneable. */
export type SluiceMetricsHandle = DecisionCountsHandle;

/**
 * `sluice/prometheus`: decisions and table gauges as Prometheus metrics, through prom-client
 * (a peer dependency the application installs and passes in; sluice does not import it).
 *
 *   import * as client from 'prom-client';
 *   const metrics = new SluiceMetrics({ client, limiters: ['api'] });
 *   const api = new RateLimiter({ limit, maxKeys, onDecision: metrics.onDecision('api') });
 *   metrics.watch('api', api);
 *   // in each worker: SluiceMetrics.attach(metrics.handle) and RateLimiter.attach(handle, { onDecision })
 *
 * Every thread counts into shared memory (decision-counts.ts), so one scrape of the registry on
 * the thread that made the metrics reports the decisions of all of them. A decision costs the
 * hook one Atomics.add on a line of its thread's; the metrics are built only when the registry is
 * scraped.
 *
 * Metrics (names after `prefix`, default `sluice_`):
 * - `decisions_total{limiter, outcome, reason}`: counter; outcome `allowed` or `refused`, reason
 *   as `Decision.reason`;
 * - `live_keys`, `tombstones`, `probe_mean`, `max_keys` `{limiter}`: gauges of each watched
 *   limiter's table, from the counts it keeps (`gauges()`, O(1));
 * - `clock_lag_ms{limiter}`: how far a watched limiter's `coarseClock()` trails real time.
 */

/** What the adapter needs of prom-client: pass the module itself. */
export interface PromClientLike {
  Counter: typeof Counter;
  Gauge: typeof Gauge;
  register: Registry;
}

export interface SluiceMetricsOptions {
  /** The prom-client module (`import * as client from 'prom-client'`). */
  client: PromClientLike;
  /** The limiter names the metrics count under (the `limiter` label), fixed up front. */
  limiters: readonly string[];
  /** Where the metrics are registered; default prom-client's global registry. */
  registry?: Registry;
  /** Prepended to every metric name; default 'sluice_'. */
  prefix?: string;
  /**
   * Rows of counts: up to this many instances (this one and those attached, on any threads) count
   * each on a cache line of its own; more share rows, still exactly. Default 64.
   */
  maxThreads?: number;
}

/** A limiter whose table the metrics can watch: RateLimiter, PolicyLimiter, ConcurrencyLimiter. */
export interface GaugeSource {
  gauges(): TableGauges;
}

/** Anything with a lag to report, such as a `coarseClock()`. */
export interface LaggingClock {
  readonly lagMs: number;
}

const NAMES = ['client', 'limiters', 'registry', 'prefix', 'maxThreads'];
const TABLE_GAUGES = [
  ['live_keys', 'Keys holding a slot in the limiter\'s table (idle ones until reclaimed)', 'liveKeys'],
  ['tombstones', 'Reclaimed slots not yet reused or compacted', 'tombstones'],
  ['probe_mean', 'Slots a lookup of a live key probes, on average', 'probeMean'],
  ['max_keys', 'Keys the table was sized for', 'maxKeys'],
] as const;

/**
 * The metrics of one process. Make it once, on the thread that serves the scrape; attach it on
 * every other thread that decides (`SluiceMetrics.attach(metrics.handle)`).
 *
 * Thread-safety: one instance per thread; instances on many threads count into one buffer.
 */
export class SluiceMetrics {
  readonly #counts: DecisionCounts;
  /** Null on an attached instance: it counts, and the thread that made the metrics reports. */
  readonly #watched: Map<string, { source: GaugeSource; clock: LaggingClock | null }> | null;

  constructor(options: SluiceMetricsOptions);
  /** @internal attach's way in. */
  constructor(options: SluiceMetricsOptions | DecisionCounts);
  constructor(options: SluiceMetricsOptions | DecisionCounts) {
    if (options instanceof DecisionCounts) {
      this.#counts = options;
      this.#watched = null;
      return;
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { client, limiters }, got ${describe(options)}`);
    }
    for (const name of Object.keys(options)) {
      if (!NAMES.includes(name)) throw new TypeError(`options.${name} is not a SluiceMetrics option (known: ${NAMES.join(', ')})`);
    }
    const { client } = options;
    if (client === null || typeof client !== 'object' || typeof client.Counter !== 'function' || typeof client.Gauge !== 'function') {
      throw new TypeError(`options.client must be the prom-client module (import * as client from 'prom-client'), got ${describe(client)}`);
    }
    const prefix = options.prefix ?? 'sluice_';
    if (typeof prefix !== 'string') throw new TypeError(`options.prefix must be a string, got ${describe(prefix)}`);
    const registry = options.registry ?? client.register;
    const counts = DecisionCounts.create(options.limiters, options.maxThreads);
    this.#counts = counts;
    const watched = new Map<string, { source: GaugeSource; clock: LaggingClock | null }>();
    this.#watched = watched;
    // What each scrape has reported so far, per limiter: the next one adds the difference.
    const reported = counts.limiters.map(() => new Uint32Array(COLUMNS));
    const now = new Uint32Array(COLUMNS);
    new client.Counter({
      name: `${prefix}decisions_total`,
      help: 'Rate limiting decisions, by limiter, outcome and reason',
      labelNames: ['limiter', 'outcome', 'reason'],
      registers: [registry],
      collect(this: Counter<'limiter' | 'outcome' | 'reason'>) {
        for (const [at, limiter] of counts.limiters.entries()) {
          counts.read(at, now);
          const last = reported[at] as Uint32Array;
          for (let c = 0; c < COLUMNS; c++) {
            const delta = ((now[c] as number) - (last[c] as number)) >>> 0;
            if (delta === 0) continue;
            this.inc({ limiter, outcome: c < REASONS.length ? 'refused' : 'allowed', reason: REASONS[c % REASONS.length] as string }, delta);
          }
          last.set(now);
        }
      },
    });
    for (const [name, help, field] of TABLE_GAUGES) {
      new client.Gauge({
        name: `${prefix}${name}`, help, labelNames: ['limiter'], registers: [registry],
        collect(this: Gauge<'limiter'>) {
          this.reset();
          for (const [limiter, { source }] of watched) this.set({ limiter }, source.gauges()[field]);
        },
      });
    }
    new client.Gauge({
      name: `${prefix}clock_lag_ms`, help: 'How far a limiter\'s coarse clock trails real time, in ms', labelNames: ['limiter'], registers: [registry],
      collect(this: Gauge<'limiter'>) {
        this.reset();
        for (const [limiter, { clock }] of watched) if (clock !== null) this.set({ limiter }, clock.lagMs);
      },
    });
  }

  /** Counts on this thread for the metrics of `handle` (made on another thread). */
  static attach(handle: SluiceMetricsHandle): SluiceMetrics {
    return new SluiceMetrics(DecisionCounts.attach(handle));
  }

  /** The structured-cloneable handle, for `attach` in a worker. */
  get handle(): SluiceMetricsHandle {
    return this.#counts.handle;
  }

  /** The `onDecision` hook that counts a limiter's decisions under `limiter` (one of `limiters`). */
  onDecision<Key = string>(limiter: string): DecisionHook<Key> {
    return this.#counts.hook(limiter) as DecisionHook<Key>;
  }

  /**
   * Reports `source`'s table gauges under `limiter` at every scrape, and the lag of `clock` (a
   * `coarseClock()`) if given. On the instance that made the metrics; watching a name again
   * replaces what it watched.
   */
  watch(limiter: string, source: GaugeSource, options: { clock?: LaggingClock } = {}): void {
    if (this.#watched === null) throw new TypeError('watch() belongs to the SluiceMetrics that registered the metrics, not to an attached one');
    if (!this.#counts.limiters.includes(limiter)) {
      throw new TypeError(`limiter ${describe(limiter)} is not one of the metrics' limiters (${this.#counts.limiters.join(', ')})`);
    }
    if (source === null || typeof source !== 'object' || typeof source.gauges !== 'function') {
      throw new TypeError(`source must be a limiter with gauges() (RateLimiter, PolicyLimiter, ConcurrencyLimiter), got ${describe(source)}`);
    }
    const clock = options.clock ?? null;
    if (clock !== null && (typeof clock !== 'object' || typeof clock.lagMs !== 'number')) {
      throw new TypeError(`options.clock must be a clock with lagMs (a coarseClock()), got ${describe(clock)}`);
    }
    this.#watched.set(limiter, { source, clock });
  }
}
