// The race lab: what each update strategy admits when workers race on one key. With a frozen
// clock and a limit of 1,000, a correct limiter admits exactly 1,000 however the threads
// interleave; under a real clock it admits at most burst + rate * elapsed.
import { coarseClock, ManualClock, perSecond, RateLimiter } from 'sluice';
import { LabPool } from './lib/lab-pool.js';
import { fmt, median } from './lib/measure.js';
import { keyStream } from './lib/streams.js';
import { newLockBuffer, VARIANTS } from './lib/variants.js';

const FROZEN_LIMIT = perSecond(1_000); // burst 1,000
const STEADY_LIMIT = perSecond(20_000, { burst: 100 });

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return { min: sorted[0] ?? NaN, median: median(sorted), max: sorted[sorted.length - 1] ?? NaN };
}

const pct = (x) => `${x >= 0 ? '+' : ''}${fmt(x * 100, 1)}%`;

export async function runRace({ quick = false } = {}) {
  const runs = quick ? 2 : 20;
  const attempts = quick ? 20_000 : 200_000;
  const steadyRuns = quick ? 1 : 5;
  const steadyMs = quick ? 150 : 500;
  const frozen = [];
  const steady = [];
  const coarse = [];
  for (const workers of [2, 4]) {
    const pool = await LabPool.start(workers, { keyCount: 1, stream: keyStream('uniform', 1, 1024) });
    for (const variant of VARIANTS) {
      const admitted = [];
      const retries = [];
      for (let r = 0; r < runs; r++) {
        const limiter = new RateLimiter({ limit: FROZEN_LIMIT, maxKeys: 16, clock: new ManualClock() });
        const res = await pool.race(variant, limiter.handle, newLockBuffer(), 'hot', attempts);
        admitted.push(res.admitted);
        retries.push(res.casRetries);
      }
      frozen.push({ workers, variant, admitted, retries });
    }
    for (const variant of VARIANTS) {
      const ratios = [];
      const admitted = [];
      for (let r = 0; r < steadyRuns; r++) {
        const limiter = new RateLimiter({ limit: STEADY_LIMIT, maxKeys: 16 });
        const res = await pool.race(variant, limiter.handle, newLockBuffer(), 'hot', 0, steadyMs);
        const ceiling = STEADY_LIMIT.burst + (STEADY_LIMIT.permits * res.elapsedMs) / 1000;
        admitted.push(res.admitted);
        ratios.push(res.admitted / ceiling - 1);
      }
      steady.push({ workers, variant, admitted, ratios });
    }
    // sluice on coarseClock(): the same race, while the main thread samples how far the shared
    // reading is behind performance.now() (lagMs reads the word without moving it).
    const clock = coarseClock();
    const ratios = [];
    const admitted = [];
    const lags = [];
    for (let r = 0; r < steadyRuns; r++) {
      const limiter = new RateLimiter({ limit: STEADY_LIMIT, maxKeys: 16, clock });
      const sampler = setInterval(() => lags.push(clock.lagMs), 1);
      const res = await pool.race('cas', limiter.handle, newLockBuffer(), 'hot', 0, steadyMs);
      clearInterval(sampler);
      const ceiling = STEADY_LIMIT.burst + (STEADY_LIMIT.permits * res.elapsedMs) / 1000;
      admitted.push(res.admitted);
      ratios.push(res.admitted / ceiling - 1);
    }
    coarse.push({ workers, admitted, ratios, lags });
    await pool.close();
  }

  const lines = ['## Race lab: one key, frozen clock, limit 1,000', ''];
  lines.push(`${runs} runs per row; in each run every worker tries the key ${fmt(attempts)} times, all starting at once. ` +
    'A correct limiter admits exactly 1,000.', '');
  lines.push('| variant | workers | admitted min / median / max | over-admission min / median / max | lost CAS races (median) |', '|---|---:|---:|---:|---:|');
  for (const row of frozen) {
    const a = summary(row.admitted);
    const over = (x) => pct(x / 1000 - 1);
    lines.push(`| ${row.variant} | ${row.workers} | ${fmt(a.min)} / ${fmt(a.median)} / ${fmt(a.max)} | ${over(a.min)} / ${over(a.median)} / ${over(a.max)} | ${row.variant === 'cas' ? fmt(median(row.retries)) : '-'} |`);
  }
  lines.push('', `## Race lab: one key, real clock, ${fmt(STEADY_LIMIT.permits)} per second (burst ${STEADY_LIMIT.burst})`, '');
  lines.push(`${steadyRuns} runs per row of ${steadyMs} ms each. The ceiling is burst + rate x elapsed; a correct limiter stays at or under it.`, '');
  lines.push('| variant | workers | admitted (median) | vs ceiling min / median / max |', '|---|---:|---:|---:|');
  for (const row of steady) {
    const r = summary(row.ratios);
    lines.push(`| ${row.variant} | ${row.workers} | ${fmt(median(row.admitted))} | ${pct(r.min)} / ${pct(r.median)} / ${pct(r.max)} |`);
  }
  lines.push('', `The same race for sluice (the cas variant) on \`coarseClock()\` (1 ms resolution), beside the default clock's row above. ` +
    'Its readings lag real time, so against real time it may pass the ceiling by up to rate x lag; the lag is sampled from the main thread ' +
    'every millisecond during the runs, with the workers racing (every core busy).', '');
  lines.push('| clock | workers | admitted (median) | vs ceiling min / median / max | lag p50 / p99 / max (ms) | rate x max lag |', '|---|---:|---:|---:|---:|---:|');
  for (const row of coarse) {
    const r = summary(row.ratios);
    const sorted = [...row.lags].sort((a, b) => a - b);
    const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
    const cas = steady.find((x) => x.workers === row.workers && x.variant === 'cas');
    const c = summary(cas.ratios);
    lines.push(`| default (performance.now()) | ${row.workers} | ${fmt(median(cas.admitted))} | ${pct(c.min)} / ${pct(c.median)} / ${pct(c.max)} | 0 | 0 |`);
    lines.push(`| coarseClock() | ${row.workers} | ${fmt(median(row.admitted))} | ${pct(r.min)} / ${pct(r.median)} / ${pct(r.max)} | ` +
      `${fmt(at(0.5), 2)} / ${fmt(at(0.99), 2)} / ${fmt(sorted[sorted.length - 1], 2)} | ${fmt((STEADY_LIMIT.permits * sorted[sorted.length - 1]) / 1000, 1)} |`);
  }
  const exact = frozen.filter((r) => r.variant !== 'unlocked').every((r) => r.admitted.every((n) => n === 1000));
  const underCeiling = steady.filter((r) => r.variant !== 'unlocked').every((r) => r.ratios.every((x) => x <= 0));
  const unlockedOver = frozen.filter((r) => r.variant === 'unlocked').flatMap((r) => r.admitted.map((n) => n / 1000 - 1));
  lines.push('');
  lines.push(`- The CAS and mutex variants admitted exactly 1,000 in every frozen-clock run: **${exact ? 'yes' : 'NO'}**; ` +
    `they stayed at or under the real-clock ceiling in every run: **${underCeiling ? 'yes' : 'NO'}**.`);
  lines.push(`- Without synchronisation the same code admitted up to ${pct(Math.max(...unlockedOver))} too many ` +
    `(median ${pct(median(unlockedOver))}) over the frozen-clock runs: read-modify-write races lose updates.`);
  return { markdown: lines.join('\n'), figures: { frozen, steady, coarse, exact, underCeiling } };
}
