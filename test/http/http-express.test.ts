// rateLimit in real Express 4 and Express 5 apps on loopback, driven by a real HTTP client (fetch,
// and autocannon for concurrent load). The limiters run on a ManualClock, so every count is exact
// and a retry "after Retry-After" is a clock move, not a sleep. Header fields are parsed as RFC 9651
// structured fields.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import express5, { type Request as ExpressRequest, type Response as ExpressResponse } from 'express';
import express4 from 'express4';
import { parseList } from 'structured-headers';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, perMinute, RateLimiter, type Decision } from '../../src/index.js';
import { ipKey, rateLimit } from '../../src/http/index.js';
import { clientKey } from '../../src/http/client-address.js';

const frameworks = [
  ['Express 4', express4 as unknown as typeof express5],
  ['Express 5', express5],
] as const;

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

async function listen(app: ReturnType<typeof express5>): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise((r) => server.once('listening', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The `ratelimit` field's items as { name: { r, t } }. */
function rateLimitItems(value: string | null): Record<string, { r: number; t: number }> {
  expect(value).not.toBeNull();
  return Object.fromEntries(parseList(value as string).map(([name, params]) => [String(name), { r: Number(params.get('r')), t: Number(params.get('t')) }]));
}

describe.each(frameworks)('rateLimit in %s', (_, express) => {
  it('sequential requests: exactly the limit pass, then 429 with Retry-After, RateLimit fields parse; a retry after Retry-After passes', async () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock });
    const app = express();
    const limit = rateLimit({ limiter }); // made before app.use: its types must hold there
    app.use(limit);
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(app);
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i < 5; i++) {
      last = await fetch(url);
      statuses.push(last.status);
      await last.text();
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const refused = last as Response;
    expect(parseList(refused.headers.get('ratelimit-policy') as string).map(([n, p]) => [n, Object.fromEntries(p)])).toEqual([['3-per-60s', { q: 3, w: 60 }]]);
    // t is the time until one more request passes, on a 429 as on a 200 (Retry-After: this one).
    expect(rateLimitItems(refused.headers.get('ratelimit'))).toEqual({ '3-per-60s': { r: 0, t: 20 } });
    expect(refused.headers.get('retry-after')).toBe('20');
    clock.advance(Number(refused.headers.get('retry-after')) * 1000);
    const again = await fetch(url);
    expect(again.status).toBe(200);
    expect(rateLimitItems(again.headers.get('ratelimit'))).toEqual({ '3-per-60s': { r: 0, t: 20 } });
  });

  it('concurrent load (autocannon, 20 connections): exactly the burst passes', async () => {
    const limiter = new RateLimiter({ limit: perMinute(50), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use(rateLimit({ limiter, key: () => 'everyone' }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(app);
    const result = await autocannon({ url, connections: 20, amount: 400 });
    expect(result['2xx']).toBe(50);
    expect(result.non2xx).toBe(350);
    expect(result.errors).toBe(0);
  });

  it("the default key follows req.ip (trust proxy), and an IPv6 client's /64 is one key", async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.set('trust proxy', true);
    app.use(rateLimit({ limiter }));
    app.get('/', (req, res) => {
      res.send(String((req as unknown as { rateLimit: Decision }).rateLimit.remaining));
    });
    const url = await listen(app);
    const from = (ip: string) => fetch(url, { headers: { 'x-forwarded-for': ip } }).then((r) => r.status);
    expect(await from('192.0.2.1')).toBe(200);
    expect(await from('192.0.2.1')).toBe(429);
    expect(await from('192.0.2.2')).toBe(200); // another client
    expect(await from('::ffff:192.0.2.2')).toBe(429); // the same client over IPv6
    expect(await from('2001:db8:1:2::a')).toBe(200);
    expect(await from('2001:db8:1:2:ffff:1:2:3')).toBe(429); // same /64
    expect(await from('2001:db8:1:3::a')).toBe(200); // the next /64
  });

  it('two limiters on one app: their RateLimit items add up, each with its own numbers', async () => {
    const clock = new ManualClock(0);
    const perKey = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock });
    const everyone = new RateLimiter({ limit: perMinute(10), maxKeys: 16, clock });
    const app = express();
    app.use(rateLimit({ limiter: perKey }));
    app.use(rateLimit({ limiter: everyone, key: () => 'all' }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(app);
    const r = await fetch(url);
    expect(parseList(r.headers.get('ratelimit-policy') as string).map(([n]) => n)).toEqual(['3-per-60s', '10-per-60s']);
    expect(rateLimitItems(r.headers.get('ratelimit'))).toEqual({ '3-per-60s': { r: 2, t: 20 }, '10-per-60s': { r: 9, t: 6 } });
  });

  it('skip, statusCode, message, a custom handler, and the decision on req.rateLimit', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use('/health', rateLimit({ limiter, key: () => 'k', skip: () => true }));
    app.use('/plain', rateLimit({ limiter, key: () => 'plain', statusCode: 503, message: 'slow down\n', requestProperty: 'quota' }));
    app.use('/custom', rateLimit<ExpressRequest, ExpressResponse>({
      limiter,
      key: () => 'custom',
      handler: (_req, res, _next, decision) => {
        res.status(429).json({ error: 'rate limited', retryAfterMs: decision.retryAfterMs });
      },
    }));
    app.get(['/health', '/plain', '/custom'], (req, res) => {
      res.json(((req as unknown as Record<string, unknown>).quota ?? (req as unknown as Record<string, unknown>).rateLimit ?? null) as object);
    });
    const url = await listen(app);
    for (let i = 0; i < 3; i++) expect((await fetch(`${url}/health`)).status).toBe(200);
    const first = await fetch(`${url}/plain`);
    expect(await first.json()).toMatchObject({ allowed: true, remaining: 0, reason: 'allowed' });
    const plain = await fetch(`${url}/plain`);
    expect([plain.status, await plain.text(), plain.headers.get('retry-after')]).toEqual([503, 'slow down\n', '60']);
    expect((await fetch(`${url}/custom`)).status).toBe(200);
    const custom = await fetch(`${url}/custom`);
    expect(custom.status).toBe(429);
    expect(await custom.json()).toEqual({ error: 'rate limited', retryAfterMs: 60_000 });
    expect(custom.headers.get('retry-after')).toBe('60');
  });
});

describe.each(frameworks)('async key, cost and skip in %s', (_, express) => {
  // Found (#29): `skip: async () => false` returns a promise, which is truthy: 10 of 10 passed
  // at 3 a minute and nothing was spent.
  it('an async skip that resolves false counts every request: exactly the limit passes', async () => {
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use(rateLimit({ limiter, key: () => 'k', skip: async () => false }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(app);
    const statuses = [];
    for (let i = 0; i < 10; i++) statuses.push((await fetch(url)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
  });

  it('async key and cost are awaited; an async skip that resolves true passes uncounted; a rejected key goes to next(error)', async () => {
    const limiter = new RateLimiter({ limit: perMinute(4), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use('/paid', rateLimit({ limiter, key: async () => 'paid', cost: async () => 2 }));
    app.use('/free', rateLimit({ limiter, key: () => 'free', skip: async () => true }));
    app.use('/broken', rateLimit({ limiter, key: async () => { throw new Error('no user'); } }));
    // Both fail: the cost's error is reported, and the key's rejection is not left unhandled.
    app.use('/both', rateLimit({ limiter, key: async () => { throw new Error('no user'); }, cost: () => { throw new Error('no price'); } }));
    app.get(['/paid', '/free', '/broken', '/both'], (_req, res) => {
      res.send('ok');
    });
    app.use((error: Error, _req: ExpressRequest, res: ExpressResponse, _next: () => void) => {
      res.status(500).send(error.message);
    });
    const url = await listen(app);
    const paid = [];
    for (let i = 0; i < 3; i++) paid.push((await fetch(`${url}/paid`)).status);
    expect(paid).toEqual([200, 200, 429]);
    expect(limiter.tryAcquire('paid', 0).remaining).toBe(0);
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/free`)).status).toBe(200);
    expect(limiter.tryAcquire('free', 0).remaining).toBe(4);
    const broken = await fetch(`${url}/broken`);
    expect([broken.status, await broken.text()]).toEqual([500, 'no user']);
    const both = await fetch(`${url}/both`);
    expect([both.status, await both.text()]).toEqual([500, 'no price']);
  });
});

describe('one limiter, Express served from several worker threads, each on its own port', () => {
  it.each([2, 4])('%i threads: exactly the limit passes over all of them', async (threads) => {
    const limiter = new RateLimiter({ limit: perMinute(120), maxKeys: 16, clock: new ManualClock(0) });
    const workers = Array.from({ length: threads }, () => new Worker(new URL('../fixtures/http-worker.mjs', import.meta.url), { workerData: { handle: limiter.handle } }));
    try {
      const ports = await Promise.all(workers.map((w) => new Promise<number>((resolve, reject) => {
        w.once('message', (m: { port: number }) => resolve(m.port));
        w.once('error', reject);
      })));
      // 400 requests over every port at once, 10 connections each.
      const results = await Promise.all(ports.map((port) => autocannon({ url: `http://127.0.0.1:${port}/`, connections: 10, amount: Math.ceil(400 / threads) })));
      expect(results.reduce((n, r) => n + r['2xx'], 0)).toBe(120);
      expect(results.reduce((n, r) => n + r.non2xx, 0)).toBe(threads * Math.ceil(400 / threads) - 120);
      expect(results.every((r) => r['2xx'] > 0)).toBe(true); // every thread admitted some
      expect(limiter.tryAcquire('one key for every thread', 0).remaining).toBe(0);
    } finally {
      await Promise.all(workers.map((w) => {
        w.postMessage('close');
        return new Promise((r) => w.once('exit', r));
      }));
    }
  });
});

describe('clientKey', () => {
  it.each([
    ['192.0.2.1', 64, '192.0.2.1'],
    ['::ffff:192.0.2.1', 64, '192.0.2.1'],
    ['2001:db8:1:2:3:4:5:6', 64, '2001:db8:1:2::/64'],
    ['2001:DB8:1:2:3:4:5:6', 48, '2001:db8:1::/48'],
    ['2001:db8:1:2a3:3:4:5:6', 56, '2001:db8:1:200::/56'],
    ['2001:db8::1', 128, '2001:db8::1'],
    // Found: /128 kept the text as written, so one address made several keys.
    ['2001:DB8::1', 128, '2001:db8::1'],
    ['2001:db8:0:0:0:0:0:1', 128, '2001:db8::1'],
    ['2001:0db8::0001', 128, '2001:db8::1'],
    ['fe80::1%eth0', 128, 'fe80::1'],
    ['::FFFF:192.0.2.1', 128, '192.0.2.1'],
    ['fe80::1%eth0', 64, 'fe80::/64'],
    ['::1', 64, '::/64'],
    ['64:ff9b::192.0.2.1', 96, '64:ff9b::/96'],
    ['not an address', 64, 'not an address'],
  ])('%s /%i is %s', (address, bits, key) => {
    expect(clientKey(address, bits)).toBe(key);
    expect(ipKey(address, bits)).toBe(key);
  });
});

describe('ipKey, for a custom key', () => {
  it('groups IPv6 by /64 unless told otherwise', () => {
    expect(ipKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(ipKey('2001:db8:1:2:ffff::9')).toBe('2001:db8:1:2::/64');
    expect(ipKey('203.0.113.9')).toBe('203.0.113.9');
  });

  it.each<[unknown, unknown, ErrorConstructor, RegExp]>([
    [undefined, 64, TypeError, /^ip must be a string \(an IPv4 or IPv6 address\), got undefined$/],
    [42, 64, TypeError, /^ip must be a string .*got 42$/],
    ['::1', 0, RangeError, /^ipv6Subnet must be an integer from 1 to 128, got 0$/],
    ['::1', 129, RangeError, /^ipv6Subnet must be an integer from 1 to 128, got 129$/],
    ['::1', 56.5, RangeError, /^ipv6Subnet must be an integer from 1 to 128, got 56\.5$/],
    ['::1', '64', TypeError, /^ipv6Subnet must be an integer, got "64"$/],
  ])('refuses ip %j with subnet %j by name', (ip, bits, type, message) => {
    const call = () => ipKey(ip as string, bits as number);
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });

  it('in an Express app: a custom key through ipKey gives one /64 one limit, where req.ip alone gives each address its own', async () => {
    const run = async (key: (req: ExpressRequest) => string): Promise<number[]> => {
      const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
      const app = express5();
      app.set('trust proxy', true); // the client's address from X-Forwarded-For, as behind a proxy
      app.use(rateLimit({ limiter, key: (req) => `tenant-a:${key(req)}` }));
      app.get('/', (_req, res) => {
        res.send('ok');
      });
      const url = await listen(app);
      const statuses: number[] = [];
      // One subscriber, a new address of its /64 for every request.
      for (let i = 1; i <= 4; i++) {
        const reply = await fetch(url, { headers: { 'x-forwarded-for': `2001:db8:aa:bb::${i}` } });
        statuses.push(reply.status);
        await reply.text();
      }
      return statuses;
    };
    // Found: a custom key of req.ip does not group IPv6: every new address is a new client.
    expect(await run((req) => req.ip as string)).toEqual([200, 200, 200, 200]);
    expect(await run((req) => ipKey(req.ip as string))).toEqual([200, 200, 429, 429]);
  });
});
