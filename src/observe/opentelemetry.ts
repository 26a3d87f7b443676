import type { Attributes, BatchObservableCallback, Meter, Observable, ObservableCounter, ObservableGauge } from '@opentelemetry/api';
import { describe } from '../config/check.js';
import type { DecisionHook } from '../rate/decision-hook.js';
import type { DecisionCountsHandle } from './decision-counts.js';
import { MetricsCore, TABLE_GAUGES, type GaugeSource, type LaggingClock } from './metrics-core.js';

export type { GaugeSource, LaggingClock } from './metrics-core.js';

/** What `SluiceOtelMetrics.attach` takes in a worker: `metrics.handle`, structured-cloneable. */
export type SluiceOtelMetricsHandle = DecisionCountsHandle;

/**
 * `sluice/opentelemetry`: decisions and table gauges as OpenTelemetry metrics, through a `Meter`
 * of `@opentelemetry/api` (a peer dependency: the application makes its MeterProvider and passes
 * a meter in; sluice does not import the API).
 *
 *   const metrics = new SluiceOtelMetrics({ meter: metricsApi.getMeter('my-service'), limiters: ['api'] });
 *   const api = new RateLimiter({ limit, maxKeys, onDecision: metrics.onDecision('api') });
 *   metrics.watch('api', api);
 *   // in each worker: SluiceOtelMetrics.attach(metrics.handle) and RateLimiter.attach(handle, { onDecision })
 *
 * As `sluice/prometheus`, every thread counts into shared memory (one Atomics.add a decision), and
 * the instruments are asynchronous: the SDK reads the counts, on the thread that made the metrics,
 * only when it collects.
 *
 * Instruments (names after `prefix`, default `sluice.`):
 * - `decisions` (counter, `{decision}`): attributes `sluice.limiter`, `sluice.outcome` (`allowed`
 *   or `refused`) and `sluice.reason` (as `Decision.reason`); cumulative since the metrics were made;
 * - `table.live_keys`, `table.tombstones`, `table.probe_mean`, `table.max_keys` (gauges,
 *   attribute `sluice.limiter`): each watched limiter's table, from the counts it keeps
 *   (`gauges()`, O(1));
 * - `clock.lag` (gauge, `ms`): how far a watched limiter's `coarseClock()` trails real time.
 */

export interface SluiceOtelMetricsOptions {
  /** A meter of the application's MeterProvider (`metrics.getMeter(name)`). */
  meter: Meter;
  /** The limiter names the metrics count under (the `sluice.limiter` attribute), fixed up front. */
  limiters: readonly string[];
  /** Prepended to every instrument's name; default 'sluice.'. */
  prefix?: string;
  /**
   * Rows of counts: up to this many instances (this one and those attached, on any threads) count
   * each on a cache line of its own; more share rows, still exactly. Default 64.
   */
  maxThreads?: number;
}

const NAMES = ['meter', 'limiters', 'prefix', 'maxThreads'];
const UNITS: Record<(typeof TABLE_GAUGES)[number][0], string> = { live_keys: '{key}', tombstones: '{slot}', probe_mean: '{slot}', max_keys: '{key}' };

/**
 * The OpenTelemetry metrics of one process. Make it once, on the thread whose MeterProvider
 * exports; attach it on every other thread that decides (`SluiceOtelMetrics.attach(metrics.handle)`).
 *
 * Thread-safety: one instance per thread; instances on many threads count into one buffer.
 */
export class SluiceOtelMetrics {
  readonly #core: MetricsCore;
  /** The meter and the callback registered with it (null on an attached instance, or once closed). */
  #registered: { meter: Meter; callback: BatchObservableCallback; observables: Observable[] } | null = null;

  constructor(options: SluiceOtelMetricsOptions);
  /** @internal attach's way in. */
  constructor(options: SluiceOtelMetricsOptions | MetricsCore);
  constructor(options: SluiceOtelMetricsOptions | MetricsCore) {
    if (options instanceof MetricsCore) {
      this.#core = options;
      return;
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options must be an object like { meter, limiters }, got ${describe(options)}`);
    }
    for (const name of Object.keys(options)) {
      if (!NAMES.includes(name)) throw new TypeError(`options.${name} is not a SluiceOtelMetrics option (known: ${NAMES.join(', ')})`);
    }
    const { meter } = options;
    if (meter === null || typeof meter !== 'object' || typeof meter.createObservableCounter !== 'function'
      || typeof meter.createObservableGauge !== 'function' || typeof meter.addBatchObservableCallback !== 'function') {
      throw new TypeError(`options.meter must be an OpenTelemetry Meter (metrics.getMeter(name)), got ${describe(meter)}`);
    }
    const prefix = options.prefix ?? 'sluice.';
    if (typeof prefix !== 'string') throw new TypeError(`options.prefix must be a string, got ${describe(prefix)}`);
    const core = MetricsCore.create(options.limiters, options.maxThreads);
    this.#core = core;
    const watched = core.watched as NonNullable<MetricsCore['watched']>;

    const decisions: ObservableCounter = meter.createObservableCounter(`${prefix}decisions`, {
      description: 'Rate limiting decisions, by limiter, outcome and reason', unit: '{decision}',
    });
    const gauges: [ObservableGauge, (typeof TABLE_GAUGES)[number][2]][] = TABLE_GAUGES.map(([name, description, field]) => [
      meter.createObservableGauge(`${prefix}table.${name}`, { description, unit: UNITS[name] }), field,
    ]);
    const lag: ObservableGauge = meter.createObservableGauge(`${prefix}clock.lag`, {
      description: 'How far a limiter\'s coarse clock trails real time', unit: 'ms',
    });
    // Cumulative totals per series (an observable counter reports its running total): each
    // collection adds what each count grew by since the last one.
    const totals = new Map<string, { attributes: Attributes; total: number }>();
    const callback: BatchObservableCallback = (result) => {
      core.grown(({ limiter, outcome, reason }, by) => {
        const id = `${limiter}\u0000${outcome}\u0000${reason}`;
        const series = totals.get(id);
        if (series === undefined) totals.set(id, { attributes: { 'sluice.limiter': limiter, 'sluice.outcome': outcome, 'sluice.reason': reason }, total: by });
        else series.total += by;
      });
      for (const { attributes, total } of totals.values()) result.observe(decisions, total, attributes);
      for (const [limiter, { source, clock }] of watched) {
        const attributes = { 'sluice.limiter': limiter };
        const g = source.gauges();
        for (const [gauge, field] of gauges) result.observe(gauge, g[field], attributes);
        if (clock !== null) result.observe(lag, clock.lagMs, attributes);
      }
    };
    const observables: Observable[] = [decisions, ...gauges.map(([g]) => g), lag];
    meter.addBatchObservableCallback(callback, observables);
    this.#registered = { meter, callback, observables };
  }

  /** Counts on this thread for the metrics of `handle` (made on another thread). */
  static attach(handle: SluiceOtelMetricsHandle): SluiceOtelMetrics {
    return new SluiceOtelMetrics(MetricsCore.attach(handle));
  }

  /** The structured-cloneable handle, for `attach` in a worker. */
  get handle(): SluiceOtelMetricsHandle {
    return this.#core.counts.handle;
  }

  /** The `onDecision` hook that counts a limiter's decisions under `limiter` (one of `limiters`). */
  onDecision<Key = string>(limiter: string): DecisionHook<Key> {
    return this.#core.onDecision<Key>(limiter);
  }

  /**
   * Reports `source`'s table gauges under `limiter` at every collection, and the lag of `clock`
   * (a `coarseClock()`) if given. On the instance that made the metrics; watching a name again
   * replaces what it watched.
   */
  watch(limiter: string, source: GaugeSource, options: { clock?: LaggingClock } = {}): void {
    this.#core.watch(limiter, source, options, 'SluiceOtelMetrics');
  }

  /**
   * Stops reporting: the meter's callback is removed (the instruments stay in the meter, and
   * report nothing more). Hooks made by `onDecision` go on counting. A second call does nothing.
   */
  close(): void {
    const r = this.#registered;
    if (r === null) return;
    this.#registered = null;
    r.meter.removeBatchObservableCallback(r.callback, r.observables);
  }
}
