/**
 * Runs worker threads that all try the same keys on one shared limiter, for a set time, and
 * counts what each worker tried and was allowed, per key, in shared memory. `sluice demo` and
 * `sluice stress` are both built on it.
 *
 * Thread-safety: `hammer` runs on the main thread; the workers (`hammer-worker.ts`) each attach
 * their own limiter instance and write only their own row of counters.
 */
import { Worker } from 'node:worker_threads';
import type { RateLimiterHandle } from '../rate/rate-limiter.js';

/*
 * Shared memory (the one place these offsets live):
 *
 *   control: Int32Array          [ GO | STOP ]
 *   counters: BigInt64Array, one row of ROW_HEADER + 2 * keys words per worker:
 *     | END_US | CAS_RETRIES | tried[0] | allowed[0] | tried[1] | allowed[1] | ...
 *
 * Each worker writes only its own row, with Atomics.store of running totals; the main thread
 * reads them with Atomics.load, live for progress and finally after every worker has exited.
 */
/** control index: 0 while workers wait at the gate, 1 once they may start. */
export const C_GO = 0;
/** control index: 1 once workers must stop. */
export const C_STOP = 1;
/** counters row index: when the worker stopped, in whole microseconds (rounded up). */
export const R_END_US = 0;
/** counters row index: compare-and-swap attempts the worker's limiter lost to other threads. */
export const R_CAS_RETRIES = 1;
/** Words in a row before the per-key counts. */
export const ROW_HEADER = 2;

/** Words in one worker's row of counters. */
export function rowWords(keys: number): number {
  return ROW_HEADER + 2 * keys;
}

/** What the workers do. */
export interface HammerPlan {
  handle: RateLimiterHandle;
  workers: number;
  keys: readonly string[];
  /** Per key, how long each worker waits between its tries of that key; 0 (default): no wait. */
  paceMs?: readonly number[];
}

/** What one worker tried and was allowed, per key in the plan's order. */
export interface WorkerCounts {
  tried: number[];
  allowed: number[];
  casRetries: number;
}

/** The outcome of a run. Every admission happened at a clock reading in [startMs, endMs]. */
export interface HammerResult {
  /** `performance.now()` just before the workers were let go. */
  startMs: number;
  /** The latest `performance.now()` at which a worker stopped. */
  endMs: number;
  /** Whether the run was cut short by Ctrl-C. */
  interrupted: boolean;
  workers: WorkerCounts[];
}

/** A live view of a run in progress, for progress displays. */
export interface LiveView {
  readonly plan: HammerPlan;
  /** Milliseconds since the workers were let go. */
  elapsedMs(): number;
  /** Tries and admissions of one key so far, summed over workers (published every few tries). */
  key(index: number): { tried: number; allowed: number };
}

/**
 * Starts `plan.workers` threads, lets them go together, stops them after `durationMs` (or at
 * Ctrl-C), and returns the counts. `watch` is called once the workers run, with a live view; its
 * `stop` is called when they have stopped. Rejects if a worker fails.
 */
export async function hammer(
  plan: HammerPlan, durationMs: number, watch?: (view: LiveView) => { stop(): void },
): Promise<HammerResult> {
  const keys = plan.keys.length;
  const stride = rowWords(keys);
  const control = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
  const counters = new BigInt64Array(new SharedArrayBuffer(plan.workers * stride * BigInt64Array.BYTES_PER_ELEMENT));
  const workerData = { handle: plan.handle, workers: plan.workers, keys: plan.keys, paceMs: plan.paceMs ?? plan.keys.map(() => 0), control, counters };
  const url = new URL('./hammer-worker.js', import.meta.url);
  const workers: Worker[] = [];
  const ready: Promise<void>[] = [];
  const exits: Promise<void>[] = [];
  for (let id = 0; id < plan.workers; id++) {
    const worker = new Worker(url, { workerData: { ...workerData, id } });
    workers.push(worker);
    const exit = new Promise<void>((resolve, reject) => {
      worker.once('error', reject);
      worker.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker ${id} exited with code ${code}`))));
    });
    exit.catch(() => undefined); // handled where it is awaited; never an unhandled rejection
    exits.push(exit);
    ready.push(Promise.race([new Promise<void>((resolve) => worker.once('message', () => resolve())), exit.then(() => {
      throw new Error(`worker ${id} exited before it was ready`);
    })]));
  }
  try {
    await Promise.all(ready);
  } catch (error: unknown) {
    await Promise.all(workers.map((w) => w.terminate()));
    throw error;
  }

  const startMs = performance.now();
  Atomics.store(control, C_GO, 1); // the gate: every worker waits on this word
  Atomics.notify(control, C_GO);
  const view: LiveView = {
    plan,
    elapsedMs: () => performance.now() - startMs,
    key(index) {
      let tried = 0;
      let allowed = 0;
      for (let w = 0; w < plan.workers; w++) {
        tried += Number(Atomics.load(counters, w * stride + ROW_HEADER + 2 * index));
        allowed += Number(Atomics.load(counters, w * stride + ROW_HEADER + 2 * index + 1));
      }
      return { tried, allowed };
    },
  };
  const display = watch?.(view);
  let interrupted = false;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(finish, durationMs);
      const onInterrupt = (): void => {
        interrupted = true;
        finish();
      };
      process.once('SIGINT', onInterrupt);
      Promise.all(exits).then(() => finish(), (error: unknown) => finish(error));
      function finish(error?: unknown): void {
        clearTimeout(timer);
        process.removeListener('SIGINT', onInterrupt);
        if (error === undefined) resolve();
        else reject(error);
      }
    });
  } finally {
    Atomics.store(control, C_STOP, 1); // workers check this word on every pass
    display?.stop();
  }
  await Promise.all(exits);
  return { startMs, endMs: endOf(counters, plan.workers, stride), interrupted, workers: read(counters, plan.workers, keys) };
}

function endOf(counters: BigInt64Array, workers: number, stride: number): number {
  let endUs = 0n;
  for (let w = 0; w < workers; w++) {
    const at = Atomics.load(counters, w * stride + R_END_US);
    if (at > endUs) endUs = at;
  }
  return Number(endUs) / 1000;
}

function read(counters: BigInt64Array, workers: number, keys: number): WorkerCounts[] {
  const stride = rowWords(keys);
  return Array.from({ length: workers }, (_, w) => {
    const base = w * stride;
    const at = (i: number): number => Number(Atomics.load(counters, base + i));
    return {
      tried: Array.from({ length: keys }, (_, k) => at(ROW_HEADER + 2 * k)),
      allowed: Array.from({ length: keys }, (_, k) => at(ROW_HEADER + 2 * k + 1)),
      casRetries: at(R_CAS_RETRIES),
    };
  });
}
