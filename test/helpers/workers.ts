// Shared by the worker-thread tests: spawning the fixture worker, awaiting its reply, and
// releasing a group of workers at once through a shared gate.
import { Worker } from 'node:worker_threads';

export const workerUrl = new URL('../fixtures/worker.mjs', import.meta.url);

/** Starts the fixture worker with `workerData`. */
export function spawn(workerData: Record<string, unknown>): Worker {
  return new Worker(workerUrl, { workerData });
}

/** The worker's next message (rejects on its error). */
export function result<T>(worker: Worker): Promise<T> {
  return new Promise((resolve, reject) => {
    // Each listener removes the other: a worker asked many times must not pile up listeners.
    const onMessage = (message: T): void => {
      worker.off('error', onError);
      resolve(message);
    };
    const onError = (error: Error): void => {
      worker.off('message', onMessage);
      reject(error);
    };
    worker.once('message', onMessage);
    worker.once('error', onError);
  });
}

/** Opens the start gate once `n` workers wait at it. */
export async function openGate(gate: SharedArrayBuffer, n: number): Promise<void> {
  const g = new Int32Array(gate);
  while (Atomics.load(g, 0) < n) await new Promise((r) => setTimeout(r, 1));
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
}
