// Four processes (node:cluster), each with two worker threads, share one limit through Redis:
// 100 requests per hour for user:42, however many processes and threads ask (an hour: a run on
// a busy machine ends long before the next request's turn, so the count is exactly 100).
// Run with a Redis at hand: REDIS_URL=redis://127.0.0.1:6379 node examples/cluster-redis.js
// (or REDIS_SOCKET=/path/to/redis.sock).
import cluster from 'node:cluster';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { perHour, RedisRateLimiter } from 'sluice';

const PROCESSES = 4;
const THREADS = 2;
const TRIES = 50; // per thread: 400 in all, against a limit of 100

function connect() {
  const socket = process.env.REDIS_SOCKET;
  return socket ? new Redis({ path: socket }) : new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
}

if (!isMainThread) {
  const redis = connect();
  const limiter = new RedisRateLimiter({ redis, limit: perHour(100), prefix: workerData });
  let admitted = 0;
  for (let i = 0; i < TRIES; i++) if (await limiter.allow('user:42')) admitted++;
  redis.disconnect();
  parentPort.postMessage(admitted);
} else if (cluster.isPrimary) {
  const prefix = `example:${process.pid}:`; // a fresh limit for every run
  let admitted = 0;
  let reports = 0;
  for (let i = 0; i < PROCESSES; i++) {
    cluster.fork({ PREFIX: prefix }).on('message', (n) => {
      admitted += n;
      if (++reports === PROCESSES) console.log(`admitted ${admitted} of ${PROCESSES * THREADS * TRIES} (limit 100 per hour)`);
    });
  }
} else {
  // One process of the cluster: its threads each ask through their own client; it adds them up.
  const threads = Array.from({ length: THREADS }, () => new Worker(new URL(import.meta.url), { workerData: process.env.PREFIX }));
  const counts = await Promise.all(threads.map((t) => new Promise((resolve) => t.once('message', resolve))));
  process.send(counts.reduce((a, b) => a + b, 0), () => process.disconnect());
}
