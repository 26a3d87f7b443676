// Drives throughput-worker.js: `workers` threads, each checking its own key set on the limiter
// behind `handle` for `ms`, all released at once through a shared gate.
import { Worker } from 'node:worker_threads';

const workerUrl = new URL('./throughput-worker.js', import.meta.url);

/**
 * Checks per second over all workers; worker i walks `keySets[i]`. With `mapLimit`, each worker
 * runs an unshared Map GCRA of that limit instead (the ceiling a shared limiter is held to).
 */
export async function workerThroughput(handle, workers, keySets, ms, mapLimit = null) {
  return (await workerRun(handle, workers, keySets, ms, mapLimit)).perSec;
}

/**
 * workerThroughput with what else the workers saw: the share of checks admitted and the
 * compareExchange retries of the timed loops (how often the workers' writes met).
 */
export async function workerRun(handle, workers, keySets, ms, mapLimit = null) {
  const gate = new SharedArrayBuffer(12);
  const g = new Int32Array(gate); // [ready count, go flag, stop flag]
  const pool = Array.from({ length: workers }, (_, i) => new Worker(workerUrl, { workerData: { handle, keys: keySets[i], gate, mapLimit } }));
  const done = pool.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
  while (Atomics.load(g, 0) < workers) await new Promise((r) => setTimeout(r, 2));
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  await new Promise((r) => setTimeout(r, ms));
  Atomics.store(g, 2, 1);
  const results = await Promise.all(done);
  await Promise.all(pool.map((w) => w.terminate()));
  const ops = results.reduce((sum, r) => sum + r.ops, 0);
  return {
    perSec: results.reduce((sum, r) => sum + r.ops / (r.ms / 1000), 0),
    allowedShare: results.reduce((sum, r) => sum + r.allowed, 0) / ops,
    retriesPerMillion: (results.reduce((sum, r) => sum + r.casRetries, 0) / ops) * 1e6,
  };
}
