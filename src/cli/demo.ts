/**
 * `sluice demo` (and `npm start`): a few worker threads share one limiter and serve three
 * tenants. One tenant floods, two stay under the limit; the summary shows the flood held to the
 * limit while the others get every request through, and checks every tenant against the most
 * GCRA permits.
 *
 * Thread-safety: main thread only; the workers are `hammer-worker.ts`, one limiter each.
 */
import { RateLimiter } from '../rate/rate-limiter.js';
import {
  checkLimiter, formatRate, parseInteger, parseOptions, parseRate, parseSeconds, stringOption,
} from './args.js';
import { mostAdmitted } from './bounds.js';
import { hammer, type LiveView } from './hammer.js';
import { fmt, print, startProgress, table, wrap } from './output.js';
import { DEMO_USAGE } from './usage.js';

const OPTIONS = {
  workers: { type: 'string' },
  seconds: { type: 'string' },
  limit: { type: 'string' },
} as const;

/** A tenant and how many requests per second it sends in all (0: as many as it can). */
interface Tenant {
  name: string;
  perSecond: number;
}

const TENANTS: readonly Tenant[] = [
  { name: 'acme', perSecond: 0 },
  { name: 'globex', perSecond: 40 },
  { name: 'initech', perSecond: 10 },
];

/** Runs `sluice demo`; resolves with the exit status. Throws `UsageError` on bad options. */
export async function runDemo(argv: readonly string[]): Promise<number> {
  const args = parseOptions(argv, OPTIONS);
  if (args.values.help === true) {
    print(DEMO_USAGE);
    return 0;
  }
  const workers = parseInteger('--workers', stringOption(args, 'workers', '4'), 1, 64);
  const seconds = parseSeconds('--seconds', stringOption(args, 'seconds', '2'), 3600);
  const limitText = stringOption(args, 'limit', '50/s');
  const options = { limit: parseRate('--limit', limitText), maxKeys: TENANTS.length };
  checkLimiter(options, limitText);
  const limiter = new RateLimiter(options);
  const limit = limiter.limit;

  print(...wrap(
    `sluice demo: ${workers} worker thread${workers === 1 ? '' : 's'} share one limiter, ` +
      `${formatRate(limit)} (burst ${fmt(limit.burst)}) per tenant, for ${seconds} s. Every worker ` +
      'serves three tenants: acme sends as fast as it can, globex 40 per s and initech 10 per s in all.',
  ), '');
  const keys = TENANTS.map((t) => `tenant:${t.name}`);
  // Each worker's pause between two tries of a paced tenant, so that all workers together send
  // the tenant's rate.
  const paceMs = TENANTS.map((t) => (t.perSecond === 0 ? 0 : (1000 * workers) / t.perSecond));
  const line = (view: LiveView): string => `  ${(view.elapsedMs() / 1000).toFixed(1)} s  ` + TENANTS.map((t, k) => {
    const c = view.key(k);
    return `${t.name} ${fmt(c.allowed)} of ${fmt(c.tried)}`;
  }).join('  ');
  const run = await hammer({ handle: limiter.handle, workers, keys, paceMs }, seconds * 1000,
    (view) => startProgress(() => line(view)));

  print('Allowed / tried, per worker:');
  print(...table(
    [{ title: 'worker', align: 'left' }, ...TENANTS.map((t) => ({ title: t.name, align: 'right' as const }))],
    run.workers.map((w, i) => [String(i), ...TENANTS.map((_, k) => `${fmt(w.allowed[k] ?? 0)} / ${fmt(w.tried[k] ?? 0)}`)]),
  ), '');

  const bound = mostAdmitted('gcra', limit, run.startMs, run.endMs);
  const tenants = TENANTS.map((t, k) => {
    const tried = run.workers.reduce((sum, w) => sum + (w.tried[k] ?? 0), 0);
    const allowed = run.workers.reduce((sum, w) => sum + (w.allowed[k] ?? 0), 0);
    const verdict = allowed > bound.most ? 'OVER the limit' : allowed === tried ? 'ok: every request allowed' : 'ok: held to the limit';
    return { name: t.name, tried, allowed, verdict };
  });
  print(...table(
    [{ title: 'tenant', align: 'left' }, { title: 'tried', align: 'right' }, { title: 'allowed', align: 'right' },
      { title: 'at most', align: 'right' }, { title: 'verdict', align: 'left' }],
    tenants.map((r) => [r.name, fmt(r.tried), fmt(r.allowed), fmt(bound.most), r.verdict]),
  ), '');
  const allowed = tenants.reduce((sum, r) => sum + r.allowed, 0);
  const tried = tenants.reduce((sum, r) => sum + r.tried, 0);
  const elapsedSec = (run.endMs - run.startMs) / 1000;
  print(...wrap(
    `In ${elapsedSec.toFixed(2)} s the workers were allowed ${fmt(allowed)} of ${fmt(tried)} requests. ` +
      `The limit permits each tenant at most ${bound.formula} = ${fmt(bound.most)}, ` +
      `${fmt(bound.most * TENANTS.length)} for the three.`,
  ));
  const ok = tenants.every((r) => r.allowed <= bound.most);
  print(ok ? 'ok: the workers never exceeded the shared limit' : 'VIOLATION: more than the limit was admitted');
  return ok ? 0 : 1;
}
