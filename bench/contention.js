// Throughput of the three update strategies (bench/lib/variants.js) over the same shared table,
// per workload, with 1, 2 and 4 workers (or the counts given: `--workers=1,2,4,8,16`). Each round runs one variant on all workers at once;
// rounds of the three variants alternate so a noisy neighbour hits them alike.
import { writeFileSync } from 'node:fs';
import { os } from './lib/os.js';
import { perSecond, RateLimiter } from 'sluice';
import { LabPool } from './lib/lab-pool.js';
import { fmt, makeKeys, median } from './lib/measure.js';
import { keyStream, topShare } from './lib/streams.js';
import { lineChart } from './lib/svg.js';
import { newLockBuffer, VARIANTS } from './lib/variants.js';

const ALLOWED = perSecond(5e7, { burst: 5e7 }); // nothing is refused at any reachable rate
const REJECTED = { permits: 1, periodMs: 3_600_000, burst: 1 }; // each key spent once beforehand
const STREAM_LENGTH = 1 << 20;

function workloads(quick) {
  const big = quick ? 20_000 : 1_000_000;
  return [
    { name: 'hot key', keyCount: 1, stream: keyStream('uniform', 1, 1024) },
    { name: '1k keys, uniform', keyCount: 1_000, stream: keyStream('uniform', 1_000, STREAM_LENGTH) },
    { name: `${fmt(big)} keys, uniform`, keyCount: big, stream: keyStream('uniform', big, STREAM_LENGTH) },
    { name: `${fmt(big)} keys, Zipf s=0.99`, keyCount: big, stream: keyStream('zipf', big, STREAM_LENGTH) },
  ];
}

/** Whether some worker count is above the machine's cores. */
const oversubscribed = (counts) => counts.some((n) => n > os.cores);

export async function runContention({ quick = false, svgDir, workers: WORKERS = [1, 2, 4], workloads: only } = {}) {
  if (!WORKERS.includes(1) || !WORKERS.includes(2)) throw new RangeError(`the contention suite's worker counts must include 1 and 2 (its targets); got ${WORKERS.join(',')}`);
  const ms = quick ? 100 : 500;
  const rounds = quick ? 1 : 3;
  const rows = [];
  // --workloads=hot,1k: only the workloads whose names start so, and their table alone.
  for (const wl of workloads(quick).filter((w) => only === undefined || only.some((o) => w.name.startsWith(o)))) {
    const keys = makeKeys(wl.keyCount, 'k');
    const limiters = {};
    for (const [mode, limit] of [['allowed', ALLOWED], ['rejected', REJECTED]]) {
      const limiter = new RateLimiter({ limit, maxKeys: Math.max(16, wl.keyCount) });
      for (const k of keys) limiter.allow(k); // every key exists (and, when rejecting, is spent)
      limiters[mode] = limiter;
    }
    for (const workers of WORKERS) {
      const pool = await LabPool.start(workers, { keyCount: wl.keyCount, prefix: 'k', stream: wl.stream });
      for (const mode of ['allowed', 'rejected']) {
        const perVariant = Object.fromEntries(VARIANTS.map((v) => [v, []]));
        const allowedShare = Object.fromEntries(VARIANTS.map((v) => [v, []]));
        for (let r = 0; r < rounds; r++) {
          for (const variant of VARIANTS) {
            const res = await pool.throughput(variant, limiters[mode].handle, newLockBuffer(), ms);
            perVariant[variant].push(res.perSec);
            allowedShare[variant].push(res.allowed);
          }
        }
        rows.push({ workload: wl.name, mode, workers, perVariant, allowedShare, zipfTop: wl.name.includes('Zipf') ? topShare(wl.stream, 100) : undefined });
      }
      await pool.close();
    }
  }
  const lines = ['## Contention lab: per-slot CAS against one global mutex and against no synchronisation', ''];
  lines.push(`Checks per second over all workers (median of ${rounds} round${rounds > 1 ? 's' : ''} of ${ms} ms per cell; rounds alternate between variants). ` +
    `This machine has ${os.cores} cores${oversubscribed(WORKERS) ? `: ${WORKERS.filter((n) => n > os.cores).join(' and ')} workers oversubscribe it, and those rows show what that does` : ''}. ` +
    '"mostly allowed": a limit nothing reaches; "mostly rejected": every key already spent for the hour. ' +
    'The unlocked column is not a usable limiter (see the race lab); it shows what synchronisation costs.', '');
  lines.push('| workload | requests | workers | CAS | mutex | unlocked | CAS / mutex | CAS / unlocked |', '|---|---|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) {
    const m = Object.fromEntries(VARIANTS.map((v) => [v, median(row.perVariant[v])]));
    lines.push(`| ${row.workload} | mostly ${row.mode} | ${row.workers} | ${fmt(m.cas)} | ${fmt(m.mutex)} | ${fmt(m.unlocked)} | ${fmt(m.cas / m.mutex, 2)}x | ${fmt(m.cas / m.unlocked, 2)}x |`);
  }
  const spreads = rows.flatMap((row) => VARIANTS.map((v) => Math.max(...row.perVariant[v]) / Math.min(...row.perVariant[v]) - 1));
  lines.push('', `Spread: across the ${fmt(spreads.length)} cells, the fastest round was ${fmt(median(spreads) * 100, 1)}% above the slowest in the median cell ` +
    `(${fmt(Math.max(...spreads) * 100, 1)}% in the worst).`);
  const zipf = rows.find((r) => r.zipfTop !== undefined);
  if (zipf) lines.push('', `In the Zipf stream the hottest 100 keys receive ${fmt(zipf.zipfTop * 100, 1)}% of the requests.`);

  // A run of some workloads (--workloads) prints their table alone: the targets and charts need them all.
  if (only !== undefined) return { markdown: lines.join('\n'), figures: { rows } };

  const cell = (workload, mode, workers) => rows.find((r) => r.workload === workload && r.mode === mode && r.workers === workers);
  const ratio = (row) => median(row.perVariant.cas) / median(row.perVariant.mutex);
  const t1 = ratio(cell('1k keys, uniform', 'allowed', 2));
  const t2 = ratio(cell('hot key', 'rejected', 2));
  const verdict = (ok) => (ok ? 'met' : '**missed**');
  lines.push('', '| target (2 workers, same run) | CAS / mutex | |', '|---|---:|---|');
  lines.push(`| 1k keys: CAS at least 2x the global mutex | ${fmt(t1, 2)}x | ${verdict(t1 >= 2)} |`);
  lines.push(`| hot key, mostly rejected: CAS at least 1.8x the mutex | ${fmt(t2, 2)}x | ${verdict(t2 >= 1.8)} |`);

  const at = (workload, mode, n) => cell(workload, mode, n);
  const one = at('1k keys, uniform', 'allowed', 1);
  const hotAllowed = at('hot key', 'allowed', 2);
  const most = Math.max(...WORKERS);
  const k1Most = at('1k keys, uniform', 'allowed', most);
  lines.push('', 'What this shows:');
  lines.push(`- With one worker there is nothing to contend for: CAS runs at ${fmt(ratio(one), 2)}x the mutex on 1k keys, the fixed cost of each strategy.`);
  lines.push(`- With two workers on 1k keys the mutex serialises them and CAS reaches ${fmt(t1, 2)}x its throughput; with ${fmt(most)} workers${most > os.cores ? ' (oversubscribed)' : ''} ${fmt(ratio(k1Most), 2)}x${most > os.cores ? ', because a preempted lock holder stalls everyone' : ''}.`);
  lines.push(`- On one hot key, refusals only read, so CAS workers never conflict: ${fmt(t2, 2)}x the mutex. Admissions on one hot key all write the same word, and CAS is ${fmt(ratio(hotAllowed), 2)}x the mutex there: a single key is inherently serial.`);
  lines.push(`- Without synchronisation the table would be ${fmt(1 / (median(one.perVariant.cas) / median(one.perVariant.unlocked)), 2)}x faster on one thread: that is the whole price of correctness, and the race tables show what it buys.`);
  // One and two workers: past two, the mutex serialises the misses too, and the ratio grows with the workers.
  const bigRows = rows.filter((r) => r.workload.endsWith('keys, uniform') && !r.workload.startsWith('1k') && r.workers <= 2);
  const bigRatios = bigRows.map(ratio);
  if (!quick && bigRows.length > 0) lines.push(`- With ${bigRows[0]?.workload.replace(', uniform', '')} (uniform) every check misses the CPU caches and the per-thread key cache, ` +
    `and CAS / mutex lies between ${fmt(Math.min(...bigRatios), 2)}x and ${fmt(Math.max(...bigRatios), 2)}x on one and two workers: memory, not synchronisation, sets the pace there.`);
  const charts = [];
  for (const [workload, mode] of [['1k keys, uniform', 'allowed'], ['hot key', 'rejected']]) {
    const series = VARIANTS.map((v) => ({
      name: v === 'cas' ? 'per-slot CAS' : v === 'mutex' ? 'global mutex' : 'unlocked (unsafe)',
      points: WORKERS.map((n) => [n, median(cell(workload, mode, n).perVariant[v])]),
    }));
    const file = `throughput-${workload.startsWith('hot') ? 'hot-key-rejected' : '1k-keys-allowed'}.svg`;
    const svg = lineChart({ title: `${workload}, mostly ${mode}: checks/s vs workers (${os.cores} cores)`, xLabel: 'workers', yLabel: 'checks per second', series });
    if (svgDir) writeFileSync(new URL(file, svgDir), svg);
    charts.push(file);
  }
  lines.push('', ...charts.map((f) => `![${f}](${f})`));
  return { markdown: lines.join('\n'), figures: { rows, t1, t2 } };
}
