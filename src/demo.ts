/**
 * `npm start`: four worker threads share one limit of 50 requests per second (burst 50) on one
 * key, each sending as fast as it can for two seconds. Prints what each was allowed and checks the
 * total against what GCRA permits: burst + rate * elapsed.
 *
 * Thread-safety: each thread attaches its own RateLimiter instance to the shared handle.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { perSecond, RateLimiter, type RateLimiterHandle } from './index.js';

const WORKERS = 4;
const RUN_MS = 2_000;
const LIMIT = perSecond(50);

interface Report {
  id: number;
  tried: number;
  allowed: number;
}

async function main(): Promise<void> {
  const limiter = new RateLimiter({ limit: LIMIT, maxKeys: 1_000 });
  console.log(`sluice demo: ${WORKERS} worker threads share ${LIMIT.permits} per second (burst ${limiter.limit.burst}) on key "api:search"`);
  const start = performance.now();
  const reports = await Promise.all(
    Array.from({ length: WORKERS }, (_, id) => new Promise<Report>((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), { workerData: { handle: limiter.handle, id, start } });
      worker.once('message', (r: Report) => { resolve(r); void worker.terminate(); });
      worker.once('error', reject);
    })),
  );
  const elapsedSec = (performance.now() - start) / 1000;
  let total = 0;
  for (const r of reports.sort((a, b) => a.id - b.id)) {
    total += r.allowed;
    console.log(`  worker ${r.id}: allowed ${String(r.allowed).padStart(4)} of ${r.tried.toLocaleString('en-US').padStart(11)} tried`);
  }
  const ceiling = Math.floor(limiter.limit.burst + (LIMIT.permits * elapsedSec));
  console.log(`  total:    allowed ${String(total).padStart(4)} in ${elapsedSec.toFixed(2)} s; GCRA permits at most ${ceiling} (burst + rate x time)`);
  console.log(total <= ceiling ? '  ok: the workers never exceeded the shared limit' : '  VIOLATION: more than the limit was admitted');
  process.exitCode = total <= ceiling ? 0 : 1;
}

function work(): void {
  const { handle, id, start } = workerData as { handle: RateLimiterHandle; id: number; start: number };
  const limiter = RateLimiter.attach(handle);
  let tried = 0;
  let allowed = 0;
  while (performance.now() - start < RUN_MS) {
    tried++;
    if (limiter.allow('api:search')) allowed++;
  }
  parentPort?.postMessage({ id, tried, allowed } satisfies Report);
}

if (isMainThread) await main();
else work();
