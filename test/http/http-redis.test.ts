// The middleware and the Fastify plugin in front of the Redis limiters: real Express 4, Express 5
// and Fastify 5 apps, each served by two processes over one real redis-server, driven by a real
// HTTP client (fetch). The limit is per hour and the test lasts seconds: the counts are exact.
import { fork, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import express5, { type Request as ExpressRequest } from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, perHour, rateLimit, RedisRateLimiter, type Decision } from '../../src/index.js';
import { privateRedis, redisAvailable } from '../helpers/redis-server.js';

const available = redisAvailable();

let children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(children.map((c) => new Promise((r) => {
    c.once('exit', r);
    if (c.connected) c.send('close');
    else c.kill();
  })));
  children = [];
});

/** Starts `framework`'s app in a process of its own; resolves with its base URL. */
async function serve(framework: string, socket: string, prefix: string, options: object): Promise<string> {
  const child = fork(new URL('../fixtures/redis-http-server.mjs', import.meta.url), [], {
    env: { ...process.env, FRAMEWORK: framework, SOCKET: socket, PREFIX: prefix, OPTIONS: JSON.stringify(options) },
  });
  children.push(child);
  const { port } = await new Promise<{ port: number }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { port: number }));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the ${framework} server exited (${code})`)));
  });
  return `http://127.0.0.1:${port}`;
}

describe.skipIf(!available)('the HTTP middleware in front of Redis', () => {
  const redisServer = privateRedis();
  let n = 0;

  it.each([
    ['express4', { limit: perHour(20) }, 20],
    ['express5', { limit: perHour(20) }, 20],
    ['fastify', { limit: perHour(20) }, 20],
    ['express5', { algorithm: 'fixed-window', limit: { permits: 15, periodMs: 50 * 365 * 86_400_000 } }, 15],
    ['fastify', { rules: [{ limit: perHour(5) }, { user: 'u1', api: 'search', limit: perHour(12) }] }, 12],
  ])('%s served by 2 processes, one Redis (%j): exactly the limit passes, the rest get 429', async (framework, options, limit) => {
    const prefix = `h${n++}:`;
    const urls = await Promise.all([0, 1].map(() => serve(framework, redisServer.server.socket, prefix, options)));
    // 60 requests, 8 at a time, alternating between the processes.
    const statuses: number[] = [];
    let refused: Response | undefined;
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < 60) {
        const i = next++;
        const res = await fetch(urls[i % 2] as string);
        statuses.push(res.status);
        if (res.status === 429) refused = res;
        await res.arrayBuffer();
      }
    }));
    expect(statuses.filter((s) => s === 200).length).toBe(limit);
    expect(statuses.filter((s) => s === 429).length).toBe(60 - limit);
    expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused?.headers.get('ratelimit')).toMatch(/;r=0;t=\d+/);
  });

  it('a degraded decision shows on req.rateLimit: onError allow lets the request on, deny answers 429', async () => {
    // Script calls fail (the server is away, as far as this client can tell); TIME works.
    const failing = {
      async call(command: string, ...args: (string | number)[]) {
        if (command === 'EVALSHA' || command === 'EVAL') throw new Error('ERR injected: the server is away');
        return redisServer.io.call(command, ...args);
      },
    };
    for (const onError of ['allow', 'deny'] as const) {
      const limiter = new RedisRateLimiter({ redis: failing, limit: perHour(5), prefix: `d${n++}:`, localTier: false, onError });
      const app = express5();
      app.use(rateLimit({ limiter, key: () => 'k', degradedHeader: 'X-RateLimit-Degraded' }));
      app.get('/', (req, res) => {
        res.json((req as ExpressRequest & { rateLimit: Decision }).rateLimit);
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      try {
        const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
        // The field the app asked for says so on either answer.
        expect(res.headers.get('x-ratelimit-degraded')).toBe('1');
        if (onError === 'allow') {
          expect(res.status).toBe(200);
          expect(await res.json()).toMatchObject({ allowed: true, reason: 'unavailable', degraded: true });
        } else {
          expect(res.status).toBe(429);
          await res.arrayBuffer();
        }
      } finally {
        await new Promise((r) => server.close(r));
      }
    }
  });

  it('degradedHeader: absent on decisions Redis made, and never sent unless asked for', async () => {
    const limiter = new RedisRateLimiter({ redis: redisServer.io, limit: perHour(5), prefix: `d${n++}:`, localTier: false });
    const app = express5();
    app.use('/asked', rateLimit({ limiter, key: () => 'a', degradedHeader: 'x-ratelimit-degraded' }));
    app.use('/plain', rateLimit({ limiter: new RedisRateLimiter({ redis: { async call() { throw new Error('ERR injected: away'); } }, limit: perHour(5), localTier: false, onError: 'allow' }), key: () => 'b' }));
    app.get(['/asked', '/plain'], (_req, res) => {
      res.send('ok');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const made = await fetch(`${base}/asked`);
      expect([made.status, made.headers.get('x-ratelimit-degraded')]).toEqual([200, null]);
      await made.arrayBuffer();
      const degraded = await fetch(`${base}/plain`);
      expect(degraded.status).toBe(200);
      expect([...degraded.headers.keys()].filter((k) => k.includes('degraded'))).toEqual([]);
      await degraded.arrayBuffer();
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(() => rateLimit({ limiter, degradedHeader: 'bad name' })).toThrow(/^options\.degradedHeader must be a header field name .* got "bad name"$/);
    expect(() => rateLimit({ limiter, degradedHeader: 1 as never })).toThrow(TypeError);
  });

  it('fastifyRateLimit, the bare hook, with a RedisRateLimiter', async () => {
    const limiter = new RedisRateLimiter({ redis: redisServer.io, limit: perHour(2), prefix: `f${n++}:`, localTier: false });
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({ limiter, key: () => 'k' }));
    app.get('/', async () => 'ok');
    try {
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) codes.push((await app.inject({ method: 'GET', url: '/' })).statusCode);
      expect(codes).toEqual([200, 200, 429, 429]);
    } finally {
      await app.close();
    }
  });
});
