// Runs checks on its own keys as fast as it can until the main thread raises the stop flag, and
// reports how many it made. All workers start together through a shared gate. With `mapLimit`,
// each worker checks an unshared Map GCRA of its own instead of the limiter behind `handle`.
import { parentPort, workerData } from 'node:worker_threads';
import { RateLimiter } from 'sluice';
import { createMapGcra } from './map-gcra.js';

const { handle, keys, gate, mapLimit } = workerData;
const limiter = mapLimit ? createMapGcra(mapLimit) : RateLimiter.attach(handle);
const g = new Int32Array(gate); // [ready count, go flag, stop flag]
for (let i = 0; i < 20_000; i++) limiter.allow(keys[i % keys.length]); // warm up the JIT
Atomics.add(g, 0, 1);
while (Atomics.load(g, 1) === 0) Atomics.wait(g, 1, 0, 5);
let ops = 0;
let allowed = 0;
const n = keys.length;
const retriesBefore = mapLimit ? 0 : limiter.stats().casRetries;
const started = performance.now();
while (Atomics.load(g, 2) === 0) {
  for (let i = 0; i < 1_000; i++) if (limiter.allow(keys[(ops + i) % n])) allowed++;
  ops += 1_000;
}
const ms = performance.now() - started;
parentPort.postMessage({ ops, allowed, ms, casRetries: mapLimit ? 0 : limiter.stats().casRetries - retriesBefore });
