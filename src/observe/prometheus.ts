import type { Counter, Gauge, Registry } from 'prom-client';
import { describe } from '../config/check.js';
import type { DecisionHook } from '../rate/decision-hook.js';
import type { DecisionCountsHandle } from './decision-counts.js';
import { MetricsCore, TABLE_GAUGES, type GaugeSource, type LaggingClock } from './metrics-core.js';

export type { GaugeSource, LaggingClock } from './metrics-core.js';

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

const NAMES = ['client', 'limiters', 'registry', 'prefix', 'maxThreads'];
/**
 * The metrics of one process. Make it once, on the thread that serves the scrape; attach it on
 * every other thread that decides (`SluiceMetrics.attach(metrics.handle)`).
 *
 * Thread-safety: one instance per thread; instances on many threads count into one buffer.
 */
export class SluiceMetrics {
  readonly #core: MetricsCore;

  constructor(options: SluiceMetricsOptions);
  /** @internal attach's way in. */
  constructor(options: SluiceMetricsOptions | MetricsCore);
  constructor(options: SluiceMetricsOptions | MetricsCore) {
    if (options instanceof MetricsCore) {
      this.#core = options;
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
    const core = MetricsCore.create(options.limiters, options.maxThreads);
    this.#core = core;
    const watched = core.watched as NonNullable<MetricsCore['watched']>;
    new client.Counter({
      name: `${prefix}decisions_total`,
      help: 'Rate limiting decisions, by limiter, outcome and reason',
      labelNames: ['limiter', 'outcome', 'reason'],
      registers: [registry],
      collect(this: Counter<'limiter' | 'outcome' | 'reason'>) {
        // A scrape adds what each count grew by since the last one.
        core.grown((labels, by) => this.inc({ ...labels }, by));
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
    return new SluiceMetrics(MetricsCore.attach(handle));
  }

  /** The structured-cloneable handle, for `attach` in a worker. */
  get handle(): SluiceMetricsHandle {
    return this.#core.counts.handle;
  }

  /** The `onDecision` hook that counts a limiter's decisions under `limiter` (one of `limiters`). */
  onDecision<Key = string>(limiter: string): DecisionHook<Key> {
    return this.#core.onDecision<Key>(limiter);
  }

  /**
   * Reports `source`'s table gauges under `limiter` at every scrape, and the lag of `clock` (a
   * `coarseClock()`) if given. On the instance that made the metrics; watching a name again
   * replaces what it watched.
   */
  watch(limiter: string, source: GaugeSource, options: { clock?: LaggingClock } = {}): void {
    this.#core.watch(limiter, source, options, 'SluiceMetrics');
  }
}
