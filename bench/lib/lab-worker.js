// A lab worker: owns its keys, attaches any variant on demand, and runs one timed throughput
// round or one race per command. All workers of a round start together through a shared gate.
import { parentPort, workerData } from 'node:worker_threads';
import { makeKeys } from './measure.js';
import { attachVariant } from './variants.js';

const { id, keyCount, prefix, stream, gate } = workerData;
const keys = makeKeys(keyCount, prefix);
const g = new Int32Array(gate); // [ready count, go flag, stop flag]
const mask = stream.length - 1; // stream length is a power of two

function startTogether() {
  Atomics.add(g, 0, 1);
  while (Atomics.load(g, 1) === 0) Atomics.wait(g, 1, 0, 5);
}

parentPort.on('message', (msg) => {
  const checker = attachVariant(msg.variant, msg.handle, msg.lockBuffer);
  if (msg.cmd === 'throughput') {
    let at = (id * 7919) & mask;
    for (let i = 0; i < 20_000; i++) checker.allow(keys[stream[(at + i) & mask]]); // warm the JIT
    startTogether();
    let ops = 0;
    let allowed = 0;
    const t0 = performance.now();
    while (Atomics.load(g, 2) === 0) {
      for (let i = 0; i < 1_000; i++) if (checker.allow(keys[stream[(at + i) & mask]])) allowed++;
      at = (at + 1_000) & mask;
      ops += 1_000;
    }
    parentPort.postMessage({ ops, allowed, ms: performance.now() - t0 });
  } else if (msg.cmd === 'race') {
    for (let i = 0; i < 20_000; i++) checker.allow('warm-up'); // its own key: spends no race quota
    startTogether();
    let admitted = 0;
    let tries = 0;
    if (msg.attempts > 0) {
      for (; tries < msg.attempts; tries++) if (checker.allow(msg.key)) admitted++;
    } else {
      while (Atomics.load(g, 2) === 0) {
        for (let i = 0; i < 256; i++) if (checker.allow(msg.key)) admitted++;
        tries += 256;
      }
    }
    parentPort.postMessage({ admitted, tries, casRetries: checker.casRetries() });
  }
});
parentPort.postMessage({ ready: true });
