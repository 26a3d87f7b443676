// One limit shared by the main thread and two workers: 10 requests per second per user.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { perSecond, RateLimiter } from 'sluice';

if (isMainThread) {
  const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 100_000 });
  console.log('main:', limiter.tryAcquire('user:42', 4)); // spends 4 of user:42's 10

  const workers = [1, 2].map((id) => new Worker(new URL(import.meta.url), { workerData: { handle: limiter.handle, id } }));
  for (const worker of workers) worker.on('message', (line) => console.log(line));
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('exit', resolve))));
  console.log('main: user:42 has', limiter.tryAcquire('user:42', 0).remaining, 'left'); // cost 0: a probe
} else {
  const limiter = RateLimiter.attach(workerData.handle); // same memory, same state
  let allowed = 0;
  for (let i = 0; i < 5; i++) if (limiter.allow('user:42')) allowed++;
  parentPort.postMessage(`worker ${workerData.id}: ${allowed} of 5 allowed`);
}
