import { MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { coarseClock, ManualClock, perSecond, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { SluiceOtelMetrics } from '../../src/observe/opentelemetry.js';
import { raceCountedDecisions } from '../helpers/metrics-race.js';

// The OpenTelemetry adapter with the real SDK (a MeterProvider and a reader that collects on
// demand): decisions counted by limiter, outcome and reason on every thread reach one collection
// on the main thread, exactly and cumulatively; the table gauges come from the counts the table
// keeps; close() stops the reports; bad options are refused by name.

/** A reader that collects when asked, as an exporter's periodic reader does on its timer. */
class OnDemandReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

function setup() {
  const reader = new OnDemandReader();
  const provider = new MeterProvider({ readers: [reader] });
  return { reader, meter: provider.getMeter('sluice-test') };
}

/** Each instrument's points of one collection: name -> (attribute values joined by spaces) -> value. */
async function collect(reader: MetricReader): Promise<Map<string, Map<string, number>>> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const out = new Map<string, Map<string, number>>();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics as MetricData[]) {
      const points = new Map<string, number>();
      for (const p of metric.dataPoints) points.set(Object.values(p.attributes).join(' '), p.value as number);
      out.set(metric.descriptor.name, points);
    }
  }
  return out;
}

describe('SluiceOtelMetrics (@opentelemetry/sdk-metrics)', () => {
  it('counts by limiter, outcome and reason, cumulatively; gauges of the watched tables; units', async () => {
    const { reader, meter } = setup();
    const metrics = new SluiceOtelMetrics({ meter, limiters: ['api', 'policy'] });
    const clock = new ManualClock();
    const api = new RateLimiter({ limit: perSecond(2), maxKeys: 100, clock, onDecision: metrics.onDecision('api') });
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 100, clock, onDecision: metrics.onDecision('policy') });
    metrics.watch('api', api);
    metrics.watch('policy', policy);
    for (let i = 0; i < 5; i++) api.allow('a');
    api.tryAcquire('b', 3);
    policy.allow({ user: 'u', api: 'x' });
    policy.allow({ user: 'u', api: 'x' });
    const first = await collect(reader);
    expect(Object.fromEntries(first.get('sluice.decisions') ?? [])).toEqual({
      'api allowed allowed': 2, 'api refused limited': 3, 'api refused exceeds-burst': 1, 'policy allowed allowed': 1, 'policy refused limited': 1,
    });
    // Cumulative: a second collection reports the running totals, every series again.
    api.allow('c');
    const second = await collect(reader);
    expect(second.get('sluice.decisions')?.get('api allowed allowed')).toBe(3);
    expect(second.get('sluice.decisions')?.get('api refused limited')).toBe(3);
    expect(Object.fromEntries(second.get('sluice.table.live_keys') ?? [])).toEqual({ api: 3, policy: 1 });
    expect(Object.fromEntries(second.get('sluice.table.max_keys') ?? [])).toEqual({ api: 100, policy: 100 });
    expect(second.get('sluice.table.probe_mean')?.get('api')).toBeGreaterThanOrEqual(1);
    expect(second.get('sluice.table.tombstones')?.get('api')).toBe(0);
    expect(second.has('sluice.clock.lag')).toBe(false); // no coarse clock watched: no points
    const { resourceMetrics } = await reader.collect();
    const units = Object.fromEntries(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m.descriptor.unit]));
    expect(units).toMatchObject({ 'sluice.decisions': '{decision}', 'sluice.table.live_keys': '{key}', 'sluice.table.tombstones': '{slot}' });
  });

  it("a coarse clock's lag, a prefix of one's own, and close()", async () => {
    const { reader, meter } = setup();
    const metrics = new SluiceOtelMetrics({ meter, limiters: ['api'], prefix: 'app.rl.' });
    const clock = coarseClock(5);
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 10, clock, onDecision: metrics.onDecision('api') });
    metrics.watch('api', limiter, { clock });
    limiter.allow('k');
    const points = await collect(reader);
    expect(points.get('app.rl.clock.lag')?.get('api')).toBeGreaterThanOrEqual(0);
    expect(points.get('app.rl.table.max_keys')?.get('api')).toBe(10);
    expect(points.get('app.rl.decisions')?.get('api allowed allowed')).toBe(1);
    const { resourceMetrics } = await reader.collect();
    expect(resourceMetrics.scopeMetrics[0]?.metrics.find((m) => m.descriptor.name === 'app.rl.clock.lag')?.descriptor.unit).toBe('ms');
    // After close() the counts are no longer read: the decision below is never reported (the SDK
    // may repeat the last total it was given).
    metrics.close();
    metrics.close(); // a second close does nothing
    limiter.allow('k');
    const after = await collect(reader);
    expect(after.get('app.rl.decisions')?.get('api allowed allowed') ?? 1).toBe(1);
  });

  it('4 workers deciding on the same keys at once: one collection on the main thread counts every decision of every thread', async () => {
    const { reader, meter } = setup();
    const metrics = new SluiceOtelMetrics({ meter, limiters: ['api'] });
    const limiter = new RateLimiter({ limit: perSecond(1_000), maxKeys: 64, onDecision: metrics.onDecision('api') });
    const { allowed, refused, casRetries } = await raceCountedDecisions(limiter, metrics.handle, 'opentelemetry', ['k0', 'k1', 'k2']);
    expect(casRetries, 'the workers never raced').toBeGreaterThan(0);
    limiter.allow('main');
    const decisions = (await collect(reader)).get('sluice.decisions');
    expect(decisions?.get('api allowed allowed')).toBe(allowed + 1);
    expect(decisions?.get('api refused limited') ?? 0).toBe(refused);
  });

  it('bad options and names are refused by name', () => {
    const { meter } = setup();
    expect(() => new SluiceOtelMetrics({ meter: {} as never, limiters: ['a'] })).toThrow(/options\.meter must be an OpenTelemetry Meter/);
    expect(() => new SluiceOtelMetrics(null as never)).toThrow(/options must be an object like \{ meter, limiters \}/);
    expect(() => new SluiceOtelMetrics({ meter, limiters: [] })).toThrow(/options\.limiters must be a non-empty array/);
    expect(() => new SluiceOtelMetrics({ meter, limiters: ['a', 'a'] })).toThrow(/names "a" twice/);
    expect(() => new SluiceOtelMetrics({ meter, limiters: ['a'], prefix: 3 } as never)).toThrow(/options\.prefix must be a string, got 3/);
    expect(() => new SluiceOtelMetrics({ meter, limiters: ['a'], registry: {} } as never)).toThrow(/options\.registry is not a SluiceOtelMetrics option/);
    const metrics = new SluiceOtelMetrics({ meter, limiters: ['a'], maxThreads: 1 });
    expect(() => metrics.onDecision('b')).toThrow(/limiter "b" is not one of the metrics' limiters \(a\)/);
    expect(() => metrics.watch('a', {} as never)).toThrow(/source must be a limiter with gauges\(\)/);
    expect(() => metrics.watch('a', new RateLimiter({ limit: perSecond(1), maxKeys: 2 }), { clock: {} as never })).toThrow(/options\.clock must be a clock with lagMs/);
    expect(() => SluiceOtelMetrics.attach({} as never)).toThrow(/handle must be a metrics handle/);
    expect(() => SluiceOtelMetrics.attach(metrics.handle).watch('a', new RateLimiter({ limit: perSecond(1), maxKeys: 2 }))).toThrow(/watch\(\) belongs to the SluiceOtelMetrics that registered/);
  });
});
