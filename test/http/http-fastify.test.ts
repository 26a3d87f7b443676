// The Fastify plugin (sluice/fastify) in a real Fastify 5 app on loopback, driven by a real HTTP
// client (fetch, and autocannon for concurrent load). Limiters run on a ManualClock: every count
// is exact. Header fields are parsed as RFC 9651 structured fields.
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import { parseList } from 'structured-headers';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, perMinute, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { RateLimitedError, sluice, type RouteRateLimit } from '../../src/http/fastify.js';

let apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.map((a) => a.close()));
  apps = [];
});

async function start(app: FastifyInstance): Promise<string> {
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('sluice/fastify in Fastify 5', () => {
  it('exactly the limit passes; a refusal goes through the error handler with RateLimit fields and Retry-After', async () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock });
    const app = Fastify();
    await app.register(sluice, { limiter });
    app.get('/', async () => 'ok');
    const url = await start(app);
    const answers: [number, string][] = [];
    for (let i = 0; i < 4; i++) {
      const r = await fetch(url);
      answers.push([r.status, await r.text()]);
      if (i === 3) {
        expect(r.headers.get('retry-after')).toBe('20');
        const [item] = parseList(r.headers.get('ratelimit') as string);
        expect([item?.[0], Object.fromEntries(item?.[1] ?? [])]).toEqual(['3-per-60s', { r: 0, t: 20 }]);
        expect(parseList(r.headers.get('ratelimit-policy') as string).map(([n]) => n)).toEqual(['3-per-60s']);
      }
    }
    expect(answers.slice(0, 3)).toEqual([[200, 'ok'], [200, 'ok'], [200, 'ok']]);
    expect(answers[3]?.[0]).toBe(429);
    // Fastify's default error handler: JSON with the error's code and message.
    expect(JSON.parse(answers[3]?.[1] as string)).toMatchObject({ statusCode: 429, code: 'SLUICE_RATE_LIMITED', error: 'Too Many Requests', message: 'Too Many Requests: retry later.' });
    clock.advance(20_000);
    expect((await fetch(url)).status).toBe(200);
  });

  it('setErrorHandler sees the refusal (RateLimitedError, with its decision) and shapes the answer', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    const seen: unknown[] = [];
    app.setErrorHandler((error, _request, reply) => {
      seen.push(error);
      if (error instanceof RateLimitedError) {
        void reply.code(error.statusCode).send({ slowDown: true, retryAfterMs: error.decision.retryAfterMs });
        return;
      }
      void reply.send(error);
    });
    await app.register(sluice, { limiter, statusCode: 503 });
    app.get('/', async () => 'ok');
    const url = await start(app);
    expect((await fetch(url)).status).toBe(200);
    const refused = await fetch(url);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ slowDown: true, retryAfterMs: 60_000 });
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeInstanceOf(RateLimitedError);
  });

  it("per-route config: rateLimit false leaves a route alone, a cost of its own spends that much; key reads request.headers", async () => {
    const limiter = new RateLimiter({ limit: perMinute(4), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, key: (request) => String(request.headers['x-api-key'] ?? 'anonymous') });
    app.get('/health', { config: { rateLimit: false } }, async () => 'up');
    app.get('/export', { config: { rateLimit: { cost: 3 } } }, async () => 'exported');
    app.get('/', async () => 'ok');
    const url = await start(app);
    const as = (path: string, key: string) => fetch(`${url}${path}`, { headers: { 'x-api-key': key } }).then((r) => r.status);
    for (let i = 0; i < 6; i++) expect(await as('/health', 'alice')).toBe(200);
    expect(await as('/export', 'alice')).toBe(200); // 3 of 4
    expect(await as('/export', 'alice')).toBe(429); // 3 more do not fit
    expect(await as('/', 'alice')).toBe(200); // the last one
    expect(await as('/', 'alice')).toBe(429);
    expect(await as('/', 'bob')).toBe(200); // another key
  });

  it('a route limit of its own (max and timeWindow, limit, or a limiter): spent instead of the plugin\'s, with its own fields and key', async () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perMinute(100), maxKeys: 16, clock });
    const exportLimiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock });
    const app = Fastify();
    await app.register(sluice, { limiter, key: () => 'client' });
    app.post('/login', { config: { rateLimit: { max: 2, timeWindow: 60_000 } } }, async () => 'in');
    app.get('/search', { config: { rateLimit: { limit: perMinute(3), cost: 2, key: (r) => String(r.headers['x-user']) } } }, async () => 'found');
    app.get('/export', { config: { rateLimit: { limiter: exportLimiter } } }, async () => 'exported');
    app.get('/', async () => 'ok');
    const url = await start(app);
    const login = () => fetch(`${url}/login`, { method: 'POST' });
    const first = await login();
    expect(first.status).toBe(200);
    expect(parseList(first.headers.get('ratelimit-policy') as string).map(([n]) => n)).toEqual(['2-per-60s']);
    expect((await login()).status).toBe(200);
    const third = await login();
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('30');
    // The plugin's limiter was not spent by the route's requests.
    expect(limiter.get('client')).toBeNull();
    const search = (user: string) => fetch(`${url}/search`, { headers: { 'x-user': user } }).then((r) => r.status);
    expect([await search('a'), await search('a'), await search('b')]).toEqual([200, 429, 200]); // cost 2 of 3, per user
    expect([(await fetch(`${url}/export`)).status, (await fetch(`${url}/export`)).status]).toEqual([200, 429]);
    expect(exportLimiter.get('client')).toMatchObject({ remaining: 0 });
    expect((await fetch(url)).status).toBe(200);
    expect(limiter.get('client')).toMatchObject({ remaining: 99 });
  });

  it('route limits are checked when the route is registered, naming the route', async () => {
    const limiter = new RateLimiter({ limit: perMinute(4), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter });
    const handler = async (): Promise<string> => 'ok';
    expect(() => app.get('/a', { config: { rateLimit: { max: 2 } } }, handler)).toThrow(/route GET \/a: max and timeWindow go together/);
    expect(() => app.get('/b', { config: { rateLimit: { max: 2, timeWindow: 1_000, limiter } } }, handler))
      .toThrow(/route GET \/b takes one of limiter, limit and max \(with timeWindow\), got limiter and max/);
    expect(() => app.get('/c', { config: { rateLimit: { max: 0, timeWindow: 1_000 } } }, handler)).toThrow(/route GET \/c\.max must be an integer from 1/);
    expect(() => app.get('/d', { config: { rateLimit: { max: 2, timeWindow: -5 } } }, handler)).toThrow(/route GET \/d\.timeWindow must be/);
    expect(() => app.get('/e', { config: { rateLimit: { maxKeys: 5 } } }, handler)).toThrow(/route GET \/e\.maxKeys sizes the table made from limit or max/);
    expect(() => app.get('/f', { config: { rateLimit: { key: () => 'k' } } }, handler)).toThrow(/route GET \/f\.key belongs with a limit of the route's own/);
    expect(() => app.get('/g', { config: { rateLimit: { limiter: {} as never } } }, handler)).toThrow(/route GET \/g: options\.limiter must be a RateLimiter/);
    expect(() => app.get('/h', { config: { rateLimit: { timewindow: 5 } as never } }, handler)).toThrow(/did you mean config\.rateLimit of route GET \/h\.timeWindow\?/);
  });

  it('in a worker thread, a route cannot make a table of its own (it would count apart): a limiter made on the main thread is attached by handle', async () => {
    const limiter = new RateLimiter({ limit: perMinute(5), maxKeys: 16, clock: new ManualClock(0) });
    const workers = [0, 1].map(() => new Worker(new URL('../fixtures/fastify-route-worker.mjs', import.meta.url), { workerData: { handle: limiter.handle } }));
    try {
      const replies = await Promise.all(workers.map((w) => new Promise<{ port: number; inlineError: string }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      })));
      for (const r of replies) expect(r.inlineError).toMatch(/would make a table in this worker thread alone.*RateLimiter\.attach\(handle\)/);
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await fetch(`http://127.0.0.1:${(replies[i % 2] as { port: number }).port}/report`)).status);
      // One limit over both threads: 5 pass in all, each thread admitted some.
      expect(statuses.filter((s) => s === 200)).toHaveLength(5);
      expect(statuses.slice(0, 2)).toEqual([200, 200]);
      expect(limiter.get('everyone')).toMatchObject({ remaining: 0 });
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  });

  // Found (#29): `{ costs: 2 }` (a typo) was ignored (cost 1), `rateLimit: true` was ignored, and
  // `cost: -1` was accepted at registration, then every request to the route got a 500.
  it('a route config is checked when the route is registered: typos and bad costs fail the app at startup', async () => {
    const limiter = new RateLimiter({ limit: perMinute(4), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, key: () => 'k' });
    const handler = async (): Promise<string> => 'ok';
    expect(() => app.get('/typo', { config: { rateLimit: { costs: 2 } as never } }, handler))
      .toThrow(/config\.rateLimit of route GET \/typo\.costs is not a route rateLimit option; did you mean config\.rateLimit of route GET \/typo\.cost\?/);
    expect(() => app.get('/negative', { config: { rateLimit: { cost: -1 } } }, handler)).toThrow(/config\.rateLimit of route GET \/negative\.cost must be an integer/);
    expect(() => app.get('/string', { config: { rateLimit: 'yes' as never } }, handler)).toThrow(/must be false, true or \{ cost, limiter, limit, max, timeWindow, key \}, got "yes"/);
    // true is the default: the route spends 1 a request.
    app.get('/on', { config: { rateLimit: true } }, handler);
    const url = await start(app);
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await fetch(`${url}/on`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
  });

  it('concurrent load (autocannon, 20 connections): exactly the burst passes', async () => {
    const limiter = new RateLimiter({ limit: perMinute(50), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, key: () => 'everyone' });
    app.get('/', async () => 'ok');
    const url = await start(app);
    const result = await autocannon({ url, connections: 20, amount: 400 });
    expect([result['2xx'], result.non2xx, result.errors]).toEqual([50, 350, 0]);
  });

  it('two registrations: their RateLimit items add up, each with its own numbers', async () => {
    const clock = new ManualClock(0);
    const app = Fastify();
    await app.register(sluice, { limiter: new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock }) });
    await app.register(sluice, { limiter: new RateLimiter({ limit: perMinute(10), maxKeys: 16, clock }), key: () => 'all' });
    app.get('/', async () => 'ok');
    const url = await start(app);
    const r = await fetch(url);
    expect(parseList(r.headers.get('ratelimit-policy') as string).map(([n]) => n)).toEqual(['3-per-60s', '10-per-60s']);
    expect(parseList(r.headers.get('ratelimit') as string).map(([n, p]) => [n, Object.fromEntries(p)])).toEqual([['3-per-60s', { r: 2, t: 20 }], ['10-per-60s', { r: 9, t: 6 }]]);
  });

  it('a PolicyLimiter: the fields follow the rule the request matches', async () => {
    const limiter = new PolicyLimiter({ rules: [{ limit: perMinute(10) }, { user: 'free', limit: perMinute(2) }], maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, key: (request) => ({ user: String(request.headers['x-user']), api: request.url }) });
    app.get('/', async () => 'ok');
    const url = await start(app);
    const r = await fetch(url, { headers: { 'x-user': 'free' } });
    expect(parseList(r.headers.get('ratelimit-policy') as string).map(([n]) => n)).toEqual(['2-per-60s']);
  });

  it('global: false limits only the routes that ask (config.rateLimit true or { cost })', async () => {
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, global: false, key: (request) => request.url });
    app.get('/open', async () => 'ok');
    app.get('/limited', { config: { rateLimit: true } }, async () => 'ok');
    app.get('/heavy', { config: { rateLimit: { cost: 2 } } }, async () => 'ok');
    const url = await start(app);
    const statuses = async (path: string, n: number): Promise<number[]> => {
      const out = [];
      for (let i = 0; i < n; i++) {
        const r = await fetch(`${url}${path}`);
        await r.text();
        out.push(r.status);
      }
      return out;
    };
    expect(await statuses('/open', 4)).toEqual([200, 200, 200, 200]);
    expect(await statuses('/limited', 3)).toEqual([200, 200, 429]);
    expect(await statuses('/heavy', 2)).toEqual([200, 429]);
    expect(limiter.tryAcquire('/open', 0).remaining).toBe(2); // never spent
  });

  it('fastify.rateLimit(): the same check placed by the route, with its own cost', async () => {
    const limiter = new RateLimiter({ limit: perMinute(10), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, global: false, key: () => 'k' });
    app.get('/export', { preHandler: app.rateLimit({ cost: 4 }) }, async (request) => `left ${request.rateLimit?.remaining}`);
    app.get('/one', { onRequest: app.rateLimit() }, async () => 'ok');
    const url = await start(app);
    const answers: [number, string][] = [];
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${url}/export`);
      answers.push([r.status, r.status === 200 ? await r.text() : (await r.json() as { code: string }).code]);
      if (i === 2) expect(r.headers.get('retry-after')).toBe('12'); // 2 left, 4 asked: 2 more, 6 s each
    }
    expect(answers).toEqual([[200, 'left 6'], [200, 'left 2'], [429, 'SLUICE_RATE_LIMITED']]);
    const one = await fetch(`${url}/one`);
    expect([one.status, parseList(one.headers.get('ratelimit') as string)[0]?.[1].get('r')]).toEqual([200, 1]);
    await one.text();
    expect(() => app.rateLimit({ costs: 1 } as never)).toThrow(/options\.costs is not a fastify\.rateLimit option/);
    expect(() => app.rateLimit({ cost: -1 })).toThrow(RangeError);
    expect(() => app.rateLimit(null as never)).toThrow(/^fastify\.rateLimit options must be an object like \{ cost \}, got null$/);
  });

  // Found: a route registered before the plugin had its config.rateLimit ignored (the plugin's
  // onRoute hook never saw it) while the plugin's hook still limited it: { max: 1 } let 4 of 4
  // through, and a misspelt { costs: 50 } was not refused.
  it('a route registered before the plugin, with a config.rateLimit object: its requests fail, naming the route', async () => {
    const limiter = new RateLimiter({ limit: perMinute(100), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    app.get('/early', { config: { rateLimit: { max: 1, timeWindow: 60_000 } } }, async () => 'ok');
    app.get('/typo', { config: { rateLimit: { costs: 50 } as never } }, async () => 'ok');
    app.get('/plain', async () => 'ok');
    app.get('/off', { config: { rateLimit: false } }, async () => 'ok');
    await app.register(sluice, { limiter, key: () => 'k' });
    const url = await start(app);
    for (const path of ['/early', '/typo']) {
      const r = await fetch(`${url}${path}`);
      expect(r.status).toBe(500);
      expect((await r.json() as { message: string }).message)
        .toMatch(new RegExp(`^config\\.rateLimit of route GET ${path} was never checked by the sluice plugin: the route was registered before it`));
    }
    expect((await fetch(`${url}/early`)).status).toBe(500);
    expect(limiter.get('k')).toBeNull(); // nothing was spent on them
    expect([(await fetch(`${url}/plain`)).status, (await fetch(`${url}/off`)).status]).toEqual([200, 200]);
  });

  // Found: an error from a route's own limit did not name the route.
  it('a bad route limit is refused naming the route and the option', async () => {
    const app = Fastify();
    await app.register(sluice, { limiter: new RateLimiter({ limit: perMinute(4), maxKeys: 16 }) });
    const handler = async (): Promise<string> => 'ok';
    expect(() => app.get('/l', { config: { rateLimit: { limit: { permits: 0, periodMs: 1000 } } } }, handler))
      .toThrow(/^config\.rateLimit of route GET \/l\.limit\.permits must be .* got 0$/);
    expect(() => app.get('/m', { config: { rateLimit: { limit: 'fast' as never } } }, handler))
      .toThrow(/^config\.rateLimit of route GET \/m\.limit must be .* got "fast"$/);
    let caught: unknown;
    try {
      app.get('/n', { config: { rateLimit: { limit: { permits: 0, periodMs: 1000 } } } }, handler);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(RangeError);
    await app.close();
  });

  // Found: { limiter: {} } with skipFailedRequests was refused for skipFailedRequests, not for the limiter.
  it('a limiter that is none is refused as such, before the options that need one', async () => {
    const limiterError = /options\.limiter must be a RateLimiter, a PolicyLimiter, a RedisRateLimiter or a RedisPolicyLimiter, got/;
    for (const more of [{ skipFailedRequests: true }, { skipSuccessfulRequests: true }, { ban: 3 }]) {
      await expect(Fastify().register(sluice, { limiter: {} as never, ...more })).rejects.toThrow(limiterError);
      const app = Fastify();
      await app.register(sluice, { limiter: new RateLimiter({ limit: perMinute(4), maxKeys: 16 }), ...more });
      expect(() => app.get('/r', { config: { rateLimit: { limiter: {} as never } } }, async () => 'ok')).toThrow(limiterError);
      await app.close();
    }
  });

  // Found: null was taken for false.
  it.each(['shadow', 'skipFailedRequests', 'skipSuccessfulRequests', 'legacyHeaders', 'global'])('options.%s: null or a string is refused by name', async (name) => {
    const limiter = new RateLimiter({ limit: perMinute(4), maxKeys: 16 });
    for (const value of [null, 'yes']) {
      const message = new RegExp(`^options\\.${name} must be a boolean, got ${value === null ? 'null' : '"yes"'}$`);
      await expect(Fastify().register(sluice, { limiter, [name]: value } as never)).rejects.toThrow(message);
    }
  });

  // Found: the documented fastify.rateLimit({ cost: 5 }) on a route with the plugin at its default
  // global: true counted the request twice (1 by the plugin's hook, then 5) and sent two items.
  it('fastify.rateLimit() placed by a route that the global hook covers: counted once, by the route\'s hook', async () => {
    const limiter = new RateLimiter({ limit: perMinute(10), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    await app.register(sluice, { limiter, key: () => 'k' });
    app.get('/export', { preHandler: app.rateLimit({ cost: 5 }) }, async (request) => `left ${request.rateLimit?.remaining}`);
    app.get('/many', { onRequest: [async () => {}, app.rateLimit({ cost: 2 })] }, async () => 'ok');
    app.get('/', async () => 'ok');
    const url = await start(app);
    const r = await fetch(`${url}/export`);
    expect([r.status, await r.text()]).toEqual([200, 'left 5']);
    expect(parseList(r.headers.get('ratelimit') as string)).toHaveLength(1);
    expect((await fetch(`${url}/many`)).status).toBe(200);
    expect(limiter.get('k')).toMatchObject({ remaining: 3 });
    expect((await fetch(url)).status).toBe(200); // the global hook still covers the others
    expect(limiter.get('k')).toMatchObject({ remaining: 2 });
  });

  it('checks its options when registered', async () => {
    await expect(Fastify().register(sluice, { limiter: new RateLimiter({ limit: perMinute(1), maxKeys: 4 }), global: 'no' } as never)).rejects.toThrow(/^options\.global must be a boolean, got "no"$/);
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 4 });
    await expect(Fastify().register(sluice, { limiter, header: false } as never)).rejects.toThrow(/options\.header is not a sluice Fastify plugin option; did you mean options\.headers\?/);
  });

  it("types: a route's config.rateLimit is typed (its cost function gets the Fastify request)", () => {
    const app = Fastify();
    // Without the plugin's declaration of config.rateLimit, `request` below would be an implicit any.
    app.get('/', { config: { rateLimit: { cost: (request) => (request.headers['x-big'] === undefined ? 1 : 2) } } }, async () => 'ok');
    const off: RouteRateLimit = false;
    app.get('/off', { config: { rateLimit: off } }, async () => 'ok');
    apps.push(app);
  });
});
