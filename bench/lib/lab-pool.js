// Drives a set of lab workers: timed throughput rounds and races, one variant at a time, with
// every worker of a round released at once.
import { Worker } from 'node:worker_threads';

const workerUrl = new URL('./lab-worker.js', import.meta.url);

export class LabPool {
  #workers;
  #gate;

  constructor(workers, gate) {
    this.#workers = workers;
    this.#gate = gate;
  }

  /** Starts `n` workers that each build `keyCount` keys and walk `stream` (power-of-two length). */
  static async start(n, { keyCount, prefix = 'k', stream }) {
    const gate = new SharedArrayBuffer(12);
    const workers = Array.from({ length: n }, (_, id) => new Worker(workerUrl, { workerData: { id, keyCount, prefix, stream, gate } }));
    await Promise.all(workers.map((w) => next(w)));
    return new LabPool(workers, gate);
  }

  async #round(message, ms) {
    const g = new Int32Array(this.#gate);
    Atomics.store(g, 0, 0);
    Atomics.store(g, 1, 0);
    Atomics.store(g, 2, 0);
    const replies = this.#workers.map((w) => next(w));
    for (const w of this.#workers) w.postMessage(message);
    while (Atomics.load(g, 0) < this.#workers.length) await sleep(1);
    const t0 = performance.now();
    Atomics.store(g, 1, 1);
    Atomics.notify(g, 1);
    if (ms > 0) {
      await sleep(ms);
      Atomics.store(g, 2, 1);
    }
    const results = await Promise.all(replies);
    return { results, elapsedMs: performance.now() - t0 };
  }

  /** Checks per second over all workers, for `ms` milliseconds of `variant`. */
  async throughput(variant, handle, lockBuffer, ms) {
    const { results } = await this.#round({ cmd: 'throughput', variant, handle, lockBuffer }, ms);
    const perSec = results.reduce((sum, r) => sum + r.ops / (r.ms / 1000), 0);
    const allowed = results.reduce((sum, r) => sum + r.allowed, 0) / results.reduce((sum, r) => sum + r.ops, 0);
    return { perSec, allowed };
  }

  /** Every worker tries `key` `attempts` times (or, with attempts 0, for `ms`); totals. */
  async race(variant, handle, lockBuffer, key, attempts, ms = 0) {
    const { results, elapsedMs } = await this.#round({ cmd: 'race', variant, handle, lockBuffer, key, attempts }, ms);
    return {
      admitted: results.reduce((sum, r) => sum + r.admitted, 0),
      tries: results.reduce((sum, r) => sum + r.tries, 0),
      casRetries: results.reduce((sum, r) => sum + r.casRetries, 0),
      elapsedMs,
    };
  }

  async close() {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}

function next(worker) {
  return new Promise((resolve, reject) => {
    const onMessage = (m) => { worker.off('error', onError); resolve(m); };
    const onError = (e) => { worker.off('message', onMessage); reject(e); };
    worker.once('message', onMessage);
    worker.once('error', onError);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
