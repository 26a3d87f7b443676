// Several workers run CPU-heavy tasks for several tenants; each tenant may start 5 tasks per
// second (burst 5), whichever worker runs them. Tasks over the limit are refused.
import { Piscina } from 'piscina';
import { perSecond, RateLimiter } from 'sluice';

const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 1_000 });
const pool = new Piscina({
  filename: new URL('./worker.js', import.meta.url).href,
  workerData: limiter.handle, // shared memory: no message per check
  minThreads: 2,
  maxThreads: 2,
});

const tenants = ['acme', 'globex', 'initech'];
const tasks = tenants.flatMap((tenant) => Array.from({ length: 8 }, () => ({ tenant, n: 20_000 })));
const results = await Promise.allSettled(tasks.map((task) => pool.run(task)));
await pool.destroy();

for (const tenant of tenants) {
  const mine = results.filter((_, i) => tasks[i].tenant === tenant);
  const done = mine.filter((r) => r.status === 'fulfilled').length;
  console.log(`${tenant.padEnd(8)} ${done} run, ${mine.length - done} refused (limit: 5 at once, 5 per second)`);
}
