// The piscina worker: CPU-heavy tasks, each first passing its tenant's limit in shared memory.
import { workerData } from 'node:worker_threads';
import { limitTasks } from 'sluice';

/** Some honest CPU work: count the primes below n. */
function countPrimes(n) {
  let count = 0;
  for (let i = 2; i < n; i++) {
    let prime = true;
    for (let d = 2; d * d <= i; d++) if (i % d === 0) { prime = false; break; }
    if (prime) count++;
  }
  return count;
}

// workerData is the limiter's handle: every worker of the pool attaches to the same limiter.
export default limitTasks(workerData, ({ n }) => countPrimes(n), { key: (task) => task.tenant, mode: 'refuse' });
