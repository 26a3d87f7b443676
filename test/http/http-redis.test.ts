// The middleware and the Fastify plugin in front of the Redis limiters: real Express 4, Express 5
// and Fastify 5 apps, each served by two processes over one real redis-server, driven by a real
// HTTP client (fetch). The limit is per hour and the test lasts seconds: the counts are exact.
import { fork, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import express5, { type Request as ExpressRequest } from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, perHour, perMinute, PolicyLimiter, rateLimit, RedisPolicyLimiter, RedisRateLimiter, type Decision } from '../../src/index.js';
import { sluice } from '../../src/http/fastify.js';
import { privateRedis, redisAvailable, TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

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
      const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: failing, limit: perHour(5), prefix: `d${n++}:`, localTier: false, onError });
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
    const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perHour(5), prefix: `d${n++}:`, localTier: false });
    const app = express5();
    app.use('/asked', rateLimit({ limiter, key: () => 'a', degradedHeader: 'x-ratelimit-degraded' }));
    app.use('/plain', rateLimit({ limiter: new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: { async call() { throw new Error('ERR injected: away'); } }, limit: perHour(5), localTier: false, onError: 'allow' }), key: () => 'b' }));
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

  // Found: a Redis decision carries no per-limit states, and every item of [perMinute(3),
  // perHour(5)] got the aggregate ("3-per-60s";r=2;t=720, "5-per-3600s";r=2;t=0) where the
  // shared-memory limiter says "3-per-60s";r=2;t=20, "5-per-3600s";r=4;t=720. The fields now hold
  // one item for the limits together: the fewest left, and the wait until every limit is full.
  describe('several limits on Redis: one item for the limits together, never one limit with another\'s numbers', () => {
    const limits = [perMinute(3), perHour(5)];
    const policyList = '"3-per-60s";q=3;w=60, "5-per-3600s";q=5;w=3600';
    /** The RateLimit-ish fields of one request through Express 5 and through the Fastify plugin. */
    async function once(limiter: RedisRateLimiter | RedisPolicyLimiter, options: object): Promise<Record<string, string>[]> {
      const key = limiter instanceof RedisPolicyLimiter ? () => ({ user: 'u', api: 'a' }) : () => 'k';
      const app = express5();
      app.use(rateLimit({ limiter, key, ...options } as never));
      app.get('/', (_req, res) => {
        res.send('ok');
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const fastify = Fastify();
      await fastify.register(sluice, { limiter, key, ...options } as never);
      fastify.get('/', async () => 'ok');
      try {
        const pick = (h: Headers): Record<string, string> => {
          const out: Record<string, string> = {};
          h.forEach((value, name) => {
            if (name.includes('ratelimit')) out[name] = value;
          });
          return out;
        };
        const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
        await res.arrayBuffer();
        const f = await fastify.inject({ method: 'GET', url: '/' });
        return [pick(res.headers), pick(new Headers(f.headers as Record<string, string>))];
      } finally {
        await new Promise((r) => server.close(r));
        await fastify.close();
      }
    }
    // A deadline no busy machine misses (a fresh limiter's first call also reads Redis's clock and
    // may load the script): a decision answered by onError has other fields.
    const limiters = (): (RedisRateLimiter | RedisPolicyLimiter)[] => [
      new RedisRateLimiter({ redis: redisServer.io, limit: limits, prefix: `m${n++}:`, localTier: false, timeoutMs: 5_000 }),
      new RedisPolicyLimiter({ redis: redisServer.io, rules: [{ limit: limits }], prefix: `m${n++}:`, localTier: false, timeoutMs: 5_000 }),
    ];

    it.each([[true], ['draft-11'], ['draft-8']] as const)('headers: %j', async (headers) => {
      for (const limiter of limiters()) {
        // Express spends first (2 left of 3 a minute, 4 of 5 an hour), then Fastify (1 and 3).
        const [express, fastify] = await once(limiter, { headers });
        expect(express).toEqual({ 'ratelimit-policy': policyList, 'ratelimit': '"3-per-60s+5-per-3600s";r=2;t=720' });
        expect(fastify).toEqual({ 'ratelimit-policy': policyList, 'ratelimit': '"3-per-60s+5-per-3600s";r=1;t=1440' });
      }
    });

    it('headers: draft-7', async () => {
      for (const limiter of limiters()) {
        const [express, fastify] = await once(limiter, { headers: 'draft-7' });
        expect(express).toEqual({ 'ratelimit-policy': '3;w=60, 5;w=3600', 'ratelimit': 'limit=3, remaining=2, reset=720' });
        expect(fastify).toEqual({ 'ratelimit-policy': '3;w=60, 5;w=3600', 'ratelimit': 'limit=3, remaining=1, reset=1440' });
      }
    });

    it('headers: draft-6, with the legacy fields', async () => {
      for (const limiter of limiters()) {
        const before = Math.floor(Date.now() / 1000);
        const [express] = await once(limiter, { headers: 'draft-6', legacyHeaders: true });
        const after = Math.ceil(Date.now() / 1000);
        const { 'x-ratelimit-reset': reset, ...rest } = express as Record<string, string>;
        expect(rest).toEqual({
          'ratelimit-policy': '3;w=60, 5;w=3600', 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '720',
          'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2',
        });
        // A Unix time: 720 s after the request, which came between the two readings (however
        // long a busy machine took over once()).
        expect(Number(reset) - before).toBeGreaterThanOrEqual(720);
        expect(Number(reset) - after).toBeLessThanOrEqual(721);
      }
    });

    it('legacyHeaders alone, and with draft-11', async () => {
      for (const limiter of limiters()) {
        const [express, fastify] = await once(limiter, { headers: false, legacyHeaders: true });
        expect([express?.['x-ratelimit-limit'], express?.['x-ratelimit-remaining'], Object.keys(express as object).length]).toEqual(['3', '2', 3]);
        expect([fastify?.['x-ratelimit-limit'], fastify?.['x-ratelimit-remaining']]).toEqual(['3', '1']);
      }
      const [, fastify] = await once(limiters()[0] as RedisRateLimiter, { legacyHeaders: true });
      expect([fastify?.['ratelimit'], fastify?.['x-ratelimit-limit'], fastify?.['x-ratelimit-remaining']])
        .toEqual(['"3-per-60s+5-per-3600s";r=1;t=1440', '3', '1']);
    });
  });

  // Found: the fields followed the rule the pair matched once Redis had answered, so a setRules
  // meanwhile (here from onDecision, which runs just before the middleware sees the decision)
  // advertised the new rule with the old rule's numbers. They follow the rule that decided.
  it.each([['RedisPolicyLimiter'], ['PolicyLimiter']])('%s, setRules while the request is decided: the fields are the deciding rule\'s', async (kind) => {
    for (const skipFailedRequests of [false, true]) {
      let switchNext = true;
      const onDecision = (): void => {
        if (switchNext) limiter.setRules([{ limit: perMinute(2) }]);
        switchNext = false;
      };
      const rules = [{ limit: perHour(5) }];
      const limiter: RedisPolicyLimiter | PolicyLimiter = kind === 'PolicyLimiter'
        ? new PolicyLimiter({ rules, maxKeys: 16, onDecision })
        : new RedisPolicyLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, rules, prefix: `r${n++}:`, localTier: false, onDecision });
      const app = express5();
      app.use(rateLimit({ limiter, key: () => ({ user: 'u', api: 'a' }), skipFailedRequests }));
      app.get('/', (_req, res) => {
        res.send('ok');
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      try {
        const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
        await res.arrayBuffer();
        expect([res.headers.get('ratelimit-policy'), res.headers.get('ratelimit')]).toEqual(['"5-per-3600s";q=5;w=3600', '"5-per-3600s";r=4;t=720']);
      } finally {
        await new Promise((r) => server.close(r));
      }
    }
  });

  it('fastifyRateLimit, the bare hook, with a RedisRateLimiter', async () => {
    const limiter = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, redis: redisServer.io, limit: perHour(2), prefix: `f${n++}:`, localTier: false });
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
