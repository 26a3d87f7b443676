import * as client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { coarseClock, ManualClock, perSecond, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { SluiceMetrics } from '../../src/observe/prometheus.js';
import { raceCountedDecisions } from '../helpers/metrics-race.js';

// The Prometheus adapter with a real prom-client registry: decisions counted by limiter, outcome
// and reason on every thread reach one scrape on the main thread, exactly; the table gauges come
// from the counts the table keeps; bad options are refused by name.

async function values(registry: client.Registry, name: string): Promise<Map<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const out = new Map<string, number>();
  for (const v of (metric?.values ?? []) as { labels: Record<string, string>; value: number }[]) {
    out.set(Object.values(v.labels).join(' '), v.value);
  }
  return out;
}

describe('SluiceMetrics (prom-client)', () => {
  it('counts by limiter, outcome and reason; gauges of the watched tables; the text format', async () => {
    const registry = new client.Registry();
    const metrics = new SluiceMetrics({ client, registry, limiters: ['api', 'policy'] });
    const clock = new ManualClock();
    const api = new RateLimiter({ limit: perSecond(2), maxKeys: 100, clock, onDecision: metrics.onDecision('api') });
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 100, clock, onDecision: metrics.onDecision('policy') });
    metrics.watch('api', api);
    metrics.watch('policy', policy);
    for (let i = 0; i < 5; i++) api.allow('a');
    api.tryAcquire('b', 3);
    policy.allow({ user: 'u', api: 'x' });
    policy.allow({ user: 'u', api: 'x' });
    const decisions = await values(registry, 'sluice_decisions_total');
    expect(Object.fromEntries(decisions)).toEqual({
      'api allowed allowed': 2, 'api refused limited': 3, 'api refused exceeds-burst': 1, 'policy allowed allowed': 1, 'policy refused limited': 1,
    });
    // A second scrape adds only what came since.
    api.allow('c');
    expect((await values(registry, 'sluice_decisions_total')).get('api allowed allowed')).toBe(3);
    expect(Object.fromEntries(await values(registry, 'sluice_live_keys'))).toEqual({ api: 3, policy: 1 });
    expect(Object.fromEntries(await values(registry, 'sluice_max_keys'))).toEqual({ api: 100, policy: 100 });
    expect((await values(registry, 'sluice_probe_mean')).get('api')).toBeGreaterThanOrEqual(1);
    expect((await values(registry, 'sluice_tombstones')).get('api')).toBe(0);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE sluice_decisions_total counter');
    expect(text).toContain('sluice_decisions_total{limiter="api",outcome="refused",reason="limited"} 3');
    expect(text).toContain('sluice_live_keys{limiter="api"} 3');
  });

  it("a coarse clock's lag, and a prefix of one's own", async () => {
    const registry = new client.Registry();
    const metrics = new SluiceMetrics({ client, registry, limiters: ['api'], prefix: 'app_rl_' });
    const clock = coarseClock(5);
    metrics.watch('api', new RateLimiter({ limit: perSecond(2), maxKeys: 10, clock }), { clock });
    const lag = (await values(registry, 'app_rl_clock_lag_ms')).get('api');
    expect(lag).toBeGreaterThanOrEqual(0);
    expect((await values(registry, 'app_rl_max_keys')).get('api')).toBe(10);
  });

  it('4 workers deciding on the same keys at once: one scrape on the main thread counts every decision of every thread', async () => {
    const registry = new client.Registry();
    const metrics = new SluiceMetrics({ client, registry, limiters: ['api'] });
    const limiter = new RateLimiter({ limit: perSecond(1_000), maxKeys: 64, onDecision: metrics.onDecision('api') });
    const { allowed, refused, casRetries } = await raceCountedDecisions(limiter, metrics.handle, 'prometheus', ['k0', 'k1', 'k2']);
    expect(casRetries, 'the workers never raced').toBeGreaterThan(0);
    limiter.allow('main');
    const decisions = await values(registry, 'sluice_decisions_total');
    expect(decisions.get('api allowed allowed')).toBe(allowed + 1);
    expect(decisions.get('api refused limited') ?? 0).toBe(refused);
  });

  it('bad options and names are refused by name', () => {
    const registry = new client.Registry();
    expect(() => new SluiceMetrics({ client: {} as never, limiters: ['a'] })).toThrow(/options\.client must be the prom-client module/);
    expect(() => new SluiceMetrics({ client, registry, limiters: [] })).toThrow(/options\.limiters must be a non-empty array/);
    expect(() => new SluiceMetrics({ client, registry, limiters: ['a', 'a'] })).toThrow(/names 'a' twice|names "a" twice/);
    expect(() => new SluiceMetrics({ client, registry, limiters: ['a'], maxThread: 4 } as never)).toThrow(/options\.maxThread is not a SluiceMetrics option/);
    const metrics = new SluiceMetrics({ client, registry, limiters: ['a'], maxThreads: 1 });
    expect(() => metrics.onDecision('b')).toThrow(/limiter "b" is not one of the metrics' limiters \(a\)/);
    expect(() => metrics.watch('a', {} as never)).toThrow(/source must be a limiter with gauges\(\)/);
    expect(() => SluiceMetrics.attach({} as never)).toThrow(/handle must be a metrics handle/);
    expect(() => new SluiceMetrics({ client, registry: new client.Registry(), limiters: ['a'], maxThreads: 0 })).toThrow(/options\.maxThreads must be an integer from 1/);
  });

  it('more instances than rows (a pool that replaces its workers) share rows, and every decision is counted', async () => {
    const registry = new client.Registry();
    const metrics = new SluiceMetrics({ client, registry, limiters: ['a'], maxThreads: 2 });
    const limiter = new RateLimiter({ limit: perSecond(1e6), maxKeys: 16, onDecision: metrics.onDecision('a') });
    // Ten more instances on this thread, as ten worker lifetimes would make: rows 1, 0, 1, ...
    for (let i = 0; i < 10; i++) {
      const counting = RateLimiter.attach(limiter.handle, { onDecision: SluiceMetrics.attach(metrics.handle).onDecision('a') });
      for (let j = 0; j <= i; j++) counting.allow('k');
    }
    limiter.allow('k');
    expect((await values(registry, 'sluice_decisions_total')).get('a allowed allowed')).toBe(55 + 1);
  });
});
