/**
 * One worker of `hammer` (see `hammer.ts` for the shared layout): attaches to the limiter, waits
 * at the gate, then tries its keys in turn until told to stop, publishing running totals into
 * its own row of counters.
 *
 * Thread-safety: runs in a worker thread; writes only its own row.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { RateLimiter, type RateLimiterHandle } from '../rate/rate-limiter.js';
import { C_GO, C_STOP, R_CAS_RETRIES, R_END_US, ROW_HEADER, rowWords } from './hammer.js';

/** What `hammer` passes in `workerData`. */
export interface HammerWorkerData {
  handle: RateLimiterHandle;
  id: number;
  workers: number;
  keys: string[];
  paceMs: number[];
  control: Int32Array;
  counters: BigInt64Array;
}

/** Tries published per batch: often enough for a live display, rare enough to cost nothing. */
const PUBLISH_EVERY_TRIES = 1024;

/** The worker's loop. Exported for reading; it runs only when this file is a worker's entry. */
export function runHammerWorker(data: HammerWorkerData): void {
  const { handle, id, workers, keys, paceMs, control, counters } = data;
  const limiter = RateLimiter.attach(handle);
  const n = keys.length;
  const row = id * rowWords(n);
  const tried = new Float64Array(n);
  const allowed = new Float64Array(n);
  const nextMs = new Float64Array(n);
  const paced = paceMs.some((ms) => ms > 0);
  const publishEveryPasses = Math.max(1, Math.floor(PUBLISH_EVERY_TRIES / n));
  const publish = (): void => {
    for (let k = 0; k < n; k++) {
      // Atomics.store of running totals: the main thread's loads never see a torn 64-bit value.
      Atomics.store(counters, row + ROW_HEADER + 2 * k, BigInt(tried[k] as number));
      Atomics.store(counters, row + ROW_HEADER + 2 * k + 1, BigInt(allowed[k] as number));
    }
  };

  parentPort?.postMessage('ready');
  Atomics.wait(control, C_GO, 0); // returns at once if the gate is already open
  const startMs = performance.now();
  // Paced keys: workers take turns, spread evenly over each interval.
  for (let k = 0; k < n; k++) nextMs[k] = startMs + ((paceMs[k] as number) * id) / workers;
  for (let pass = 1; Atomics.load(control, C_STOP) === 0; pass++) {
    const nowMs = paced ? performance.now() : 0;
    for (let j = 0; j < n; j++) {
      const k = (j + id) % n; // each worker starts its pass at a different key
      const pace = paceMs[k] as number;
      if (pace > 0) {
        if (nowMs < (nextMs[k] as number)) continue;
        nextMs[k] = (nextMs[k] as number) + pace;
      }
      tried[k] = (tried[k] as number) + 1;
      if (limiter.allow(keys[k] as string)) allowed[k] = (allowed[k] as number) + 1;
    }
    if (pass % publishEveryPasses === 0) publish();
  }
  // The clock read after the last try: every admission of this worker happened before it.
  const endUs = Math.ceil(performance.now() * 1000);
  publish();
  Atomics.store(counters, row + R_CAS_RETRIES, BigInt(limiter.stats().casRetries));
  Atomics.store(counters, row + R_END_US, BigInt(endUs));
}

if (!isMainThread) runHammerWorker(workerData as HammerWorkerData);
