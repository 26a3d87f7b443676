// Observability: what a decision hook costs on `allow`, and what a metrics scrape costs. One
// thread, 1,000 existing keys, in paired rounds (forward, then backward), ratios per round:
// - `allow` with no hook (the class's own method, which never looks for one), with a no-op
//   `onDecision`, and with the Prometheus adapter's hook (SluiceMetrics, a real prom-client);
// - reading the table's gauges (`gauges()`, O(1)) against counting its slots (`stats()`), and a
//   whole prom-client scrape of the adapter's metrics, at 1,000,000 keys.
import * as client from 'prom-client';
import { perSecond, RateLimiter } from 'sluice';
import { SluiceMetrics } from 'sluice/prometheus';
import { BATCH, bytesPerCall, fmt, makeKeys, nsPerCallPaired, pairedRatio } from './lib/measure.js';

const KEYS = 1_000;
const BIG = 1_000_000;

export async function runObservability({ quick }) {
  const keys = makeKeys(KEYS);
  const metrics = new SluiceMetrics({ client, registry: new client.Registry(), limiters: ['api'] });
  // The core suite's limit: existing keys, mostly allowed, at width 32.
  const make = (onDecision) => new RateLimiter({ limit: perSecond(1e6, { burst: 1e6 }), maxKeys: 4 * KEYS, ...(onDecision ? { onDecision } : {}) });
  const contestants = {
    'allow, no onDecision': make(null),
    'allow, a no-op onDecision': make(() => {}),
    'allow, the Prometheus adapter (SluiceMetrics)': make(metrics.onDecision('api')),
  };
  let at = 0;
  const tasks = Object.fromEntries(Object.entries(contestants).map(([name, l]) => [name, () => {
    for (let i = 0; i < BATCH; i++) {
      l.allow(keys[at]);
      if (++at === KEYS) at = 0;
    }
  }]));
  for (const l of Object.values(contestants)) for (const k of keys) l.allow(k);
  const rounds = quick ? 2 : 9;
  const res = await nsPerCallPaired(tasks, { rounds, ...(quick ? { timeMs: 150, warmupMs: 50 } : { timeMs: 700, warmupMs: 150 }) });
  const base = res['allow, no onDecision'];
  const bytes = {};
  for (const [name, l] of Object.entries(contestants)) bytes[name] = await bytesPerCall((i) => l.allow(keys[i % KEYS]));

  // A scrape: 1,000,000 live keys (quick: 100,000).
  const n = quick ? BIG / 10 : BIG;
  const big = new RateLimiter({ limit: perSecond(10), maxKeys: n, maxKeyBytes: 24, onDecision: metrics.onDecision('api') });
  for (let i = 0; i < n; i++) big.allow(`user:${i}`);
  metrics.watch('api', big);
  const registry = new client.Registry();
  const scraped = new SluiceMetrics({ client, registry, limiters: ['api'] });
  scraped.watch('api', big);
  const time = (fn, reps) => {
    fn();
    const t = performance.now();
    for (let i = 0; i < reps; i++) fn();
    return (performance.now() - t) / reps;
  };
  const gaugesMs = time(() => big.gauges(), 10_000);
  const statsMs = time(() => big.stats(), quick ? 2 : 5);
  await registry.metrics();
  const scrapes = quick ? 20 : 200;
  const scrapeStart = performance.now();
  for (let i = 0; i < scrapes; i++) await registry.metrics();
  const scrapeMs = (performance.now() - scrapeStart) / scrapes;
  const agree = big.gauges().liveKeys === big.stats().liveKeys;

  const lines = [
    '## Observability: a decision hook on `allow`, and a scrape',
    '',
    `One thread, ${fmt(KEYS)} existing keys, the default clock; ${rounds} paired rounds, each row's ratio taken per round against the row without a hook (bench/observability.js).`,
    '',
    '| allow | ns/call median | p25..p75 | x no hook, per round | bytes/call |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const [name, r] of Object.entries(res)) {
    lines.push(`| ${name} | ${r.median.toFixed(1)} | ${r.p25.toFixed(1)}..${r.p75.toFixed(1)} | ${pairedRatio(r, base).toFixed(2)}x | ${bytes[name].toFixed(1)} |`);
  }
  lines.push('');
  lines.push(`A scrape at ${fmt(n)} live keys (\`maxKeyBytes: 24\`): \`gauges()\` ${(gaugesMs * 1e3).toFixed(2)} us; \`stats()\`, which reads every slot, ${statsMs.toFixed(1)} ms; ` +
    `a whole prom-client scrape of the adapter's metrics (\`registry.metrics()\`, one limiter watched) ${(scrapeMs * 1e3).toFixed(0)} us. ` +
    `The gauges' live keys ${agree ? 'equal' : 'differ from'} the count of the slots.`);
  return { markdown: lines.join('\n') };
}
