// One app of the HTTP-on-Redis suite, in a process of its own (forked by bench/http-redis.js, so
// that the load generator does not share its event loop): Express 5 or Fastify 5, limited per
// `x-key` header by sluice's middleware or plugin over a RedisRateLimiter, by a middleware over
// rate-limiter-flexible's RateLimiterRedis, or by @fastify/rate-limit with its Redis store. Every
// contestant: a fixed window of 1 request per key per hour, no lease. Sends its port to the parent.
import fastifyRateLimit from '@fastify/rate-limit';
import express from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { perHour, RedisRateLimiter, rateLimit } from 'sluice';
import { sluice } from 'sluice/fastify';

const [framework, contestant, socket] = process.argv.slice(2);
const redis = new Redis({ path: socket, enableAutoPipelining: false });
await redis.ping();
const keyOf = (req) => String(req.headers['x-key']);
const WINDOW_S = 3600;

function sluiceLimiter(tier) {
  return new RedisRateLimiter({ redis, prefix: `b:${process.pid}:`, limit: perHour(1), algorithm: 'fixed-window', localTier: tier ? undefined : false });
}

let listen;
if (framework === 'express') {
  const app = express();
  if (contestant === 'sluice' || contestant === 'sluice, no local tier') {
    app.use(rateLimit({ limiter: sluiceLimiter(contestant === 'sluice'), key: keyOf }));
  } else {
    // rate-limiter-flexible has no Express middleware of its own: this is the usual few lines.
    const rl = new RateLimiterRedis({ storeClient: redis, keyPrefix: `r:${process.pid}`, points: 1, duration: WINDOW_S });
    app.use((req, res, next) => {
      rl.consume(keyOf(req)).then((r) => {
        res.set('RateLimit-Remaining', String(r.remainingPoints));
        next();
      }, (r) => {
        if (r instanceof Error) return next(r);
        res.set('Retry-After', String(Math.ceil(r.msBeforeNext / 1000))).status(429).send('Too Many Requests');
      });
    });
  }
  app.get('/', (_req, res) => { res.send('ok'); });
  listen = () => new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s.address().port)); });
} else {
  const app = Fastify();
  if (contestant === 'sluice' || contestant === 'sluice, no local tier') {
    await app.register(sluice, { limiter: sluiceLimiter(contestant === 'sluice'), key: keyOf });
    app.setErrorHandler((error, _request, reply) => reply.code(error.statusCode ?? 500).send(error.message));
  } else {
    await app.register(fastifyRateLimit, { redis, nameSpace: `f:${process.pid}:`, max: 1, timeWindow: WINDOW_S * 1000, keyGenerator: keyOf });
  }
  app.get('/', async () => 'ok');
  listen = async () => { await app.listen({ port: 0, host: '127.0.0.1' }); return app.server.address().port; };
}
process.send({ port: await listen() });
process.on('message', (m) => {
  if (m === 'exit') process.exit(0); // a clean exit (a CPU profile, when asked for, is written)
});
