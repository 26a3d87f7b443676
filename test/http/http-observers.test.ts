// Shadow mode and the onExceeded / onLimit hooks, on a real node:http server, a real Express 5 app
// and a real Fastify 5 app, driven by fetch. The limiters run on a ManualClock: every count is
// exact.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, ManualClock, perMinute, PolicyLimiter, RateLimiter, type Decision } from '../../src/index.js';
import { rateLimit, type RateLimitOptions } from '../../src/http/middleware.js';
import { sluice } from '../../src/http/fastify.js';

let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

/** Each answer: status, the app's body, and whether any RateLimit field or Retry-After came. */
async function hit(url: string, times: number): Promise<{ status: number; body: string; fields: boolean }[]> {
  const out = [];
  for (let i = 0; i < times; i++) {
    const r = await fetch(url);
    const fields = [...r.headers.keys()].some((k) => k.includes('ratelimit') || k === 'retry-after');
    out.push({ status: r.status, body: await r.text(), fields });
  }
  return out;
}

/** A node:http server behind `options`' middleware; its body is req.rateLimit's allowed and remaining. */
async function nodeServer(options: Omit<RateLimitOptions, 'limiter' | 'key'> & { key?: unknown }, limiter: RateLimiter): Promise<string> {
  const limit = rateLimit({ limiter, ...options } as RateLimitOptions);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    limit(req, res, (error) => {
      if (error !== undefined) {
        res.statusCode = 500;
        res.end(`error: ${(error as Error).message}`);
        return;
      }
      const d = (req as IncomingMessage & { rateLimit?: Decision }).rateLimit;
      res.end(d === undefined ? 'unchecked' : `${d.allowed}:${d.remaining}`);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('onExceeded and onLimit', () => {
  it('onLimit: the admission that leaves nothing; onExceeded: each refusal, before its 429', async () => {
    const events: string[] = [];
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({
      onLimit: (req: IncomingMessage, d: Decision) => events.push(`limit ${req.url} r=${d.remaining}`),
      onExceeded: (req: IncomingMessage, d: Decision) => events.push(`exceeded ${req.url} wait=${d.retryAfterMs}`),
    }, limiter);
    const answers = await hit(url, 4);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429, 429]);
    expect(events).toEqual(['limit / r=0', 'exceeded / wait=30000', 'exceeded / wait=30000']);
  });

  it('onExceeding: each admitted request, counted; not those allowList or skip let through', async () => {
    const events: string[] = [];
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({
      key: (req: IncomingMessage) => String(req.headers['x-client'] ?? 'anon'),
      allowList: ['trusted'],
      skip: (req: IncomingMessage) => req.url === '/health',
      onExceeding: (_req: IncomingMessage, d: Decision) => events.push(`exceeding r=${d.remaining}`),
      onExceeded: () => events.push('exceeded'),
    }, limiter);
    for (const [path, client] of [['/', 'anon'], ['/health', 'anon'], ['/', 'trusted'], ['/', 'anon'], ['/', 'anon']]) {
      const r = await fetch(`${url}${path}`, { headers: { 'x-client': client as string } });
      await r.text();
    }
    expect(events).toEqual(['exceeding r=1', 'exceeding r=0', 'exceeded']);
  });

  it('a hook that throws: the error goes to next, as any other', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({ onExceeded: () => { throw new Error('hook failed'); } }, limiter);
    expect((await hit(url, 2)).map((a) => [a.status, a.body])).toEqual([[200, 'true:0'], [500, 'error: hook failed']]);
  });

  it.each<[string, unknown, RegExp]>([
    ['shadow', 'yes', /^options\.shadow must be a boolean, got "yes"$/],
    ['onExceeded', 1, /^options\.onExceeded must be a function \(req, decision\), got 1$/],
    ['onLimit', 'log', /^options\.onLimit must be a function \(req, decision\), got "log"$/],
    ['onExceeding', {}, /^options\.onExceeding must be a function \(req, decision\), got an object$/],
    ['allowList', '127.0.0.1', /^options\.allowList must be an array of keys \(strings\) or a function \(req, key\), got "127\.0\.0\.1"$/],
    ['allowList', ['a', 1], /^options\.allowList must be an array of keys .* got an array/],
    ['denyList', 'bad-bot', /^options\.denyList must be an array of keys \(strings\) or a function \(req, key\), got "bad-bot"$/],
  ])('a bad %s throws at once, by name', (name, value, message) => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 4 });
    expect(() => rateLimit({ limiter, [name]: value } as never)).toThrow(TypeError);
    expect(() => rateLimit({ limiter, [name]: value } as never)).toThrow(message);
  });
});

describe('allowList', () => {
  it('a list of keys: their requests go on uncounted, with no fields; other keys are limited', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({ key: (req: IncomingMessage) => String(req.headers['x-client']), allowList: ['ops', 'monitor'] }, limiter);
    const as = async (client: string) => {
      const r = await fetch(url, { headers: { 'x-client': client } });
      await r.text();
      return [r.status, r.headers.has('ratelimit')] as const;
    };
    expect([await as('ops'), await as('ops'), await as('ops')]).toEqual([[200, false], [200, false], [200, false]]);
    expect([await as('user'), await as('user')]).toEqual([[200, true], [429, true]]);
    expect(limiter.tryAcquire('ops', 0).remaining).toBe(1); // nothing was spent
  });

  it('a function of the request and the key, async too; with a PolicyLimiter the key is the user', async () => {
    const limiter = new PolicyLimiter({ rules: [{ limit: perMinute(1) }], maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({
      key: (req: IncomingMessage) => ({ user: String(req.headers['x-user']), api: 'search' }),
      allowList: async (req: IncomingMessage, user: string) => user.startsWith('internal:') && req.method === 'GET',
    } as never, limiter as never);
    const as = async (user: string) => {
      const r = await fetch(url, { headers: { 'x-user': user } });
      await r.text();
      return r.status;
    };
    expect([await as('internal:batch'), await as('internal:batch'), await as('alice'), await as('alice')]).toEqual([200, 200, 200, 429]);
  });
});

describe('denyList', () => {
  it('node:http: a listed key gets 403 at once, uncounted, without fields; a key on both lists is refused; shadow mode lets it on and onExceeded sees it', async () => {
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
    const key = (req: IncomingMessage) => String(req.headers['x-client']);
    const url = await nodeServer({ key, denyList: ['bot', 'both'], allowList: ['both', 'ops'] }, limiter);
    const as = async (client: string, u = url) => {
      const r = await fetch(u, { headers: { 'x-client': client } });
      return [r.status, await r.text(), r.headers.has('ratelimit') || r.headers.has('retry-after')] as const;
    };
    expect(await as('bot')).toEqual([403, 'Forbidden\n', false]);
    expect(await as('both')).toEqual([403, 'Forbidden\n', false]);
    expect((await as('ops'))[0]).toBe(200);
    expect((await as('user'))[0]).toBe(200);
    expect(limiter.get('bot')).toBeNull(); // never counted
    const exceeded: string[] = [];
    const shadow = await nodeServer({
      key, shadow: true, denyList: async (_req: IncomingMessage, k: string) => k === 'bot', onExceeded: (req: IncomingMessage) => exceeded.push(key(req)),
    }, limiter);
    expect((await as('bot', shadow))[0]).toBe(200);
    expect(exceeded).toEqual(['bot']);
  });

  it('Express, the Fastify plugin and the bare Fastify hook answer 403 the same way', async () => {
    const limiter = new RateLimiter({ limit: perMinute(5), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use(rateLimit({ limiter, key: (req) => String(req.headers['x-client']), denyList: ['bot'] }));
    app.get('/', (_req, res) => void res.send('ok'));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    closers.push(() => new Promise((r) => server.close(r)));
    const expressUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const plugin = Fastify();
    await plugin.register(sluice, { limiter, key: (request) => String(request.headers['x-client']), denyList: ['bot'] });
    plugin.get('/', async () => 'ok');
    await plugin.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => plugin.close());
    const bare = Fastify();
    bare.addHook('onRequest', fastifyRateLimit({ limiter, key: (request) => String((request as { headers: Record<string, string> }).headers['x-client']), denyList: ['bot'] }));
    bare.get('/', async () => 'ok');
    await bare.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => bare.close());
    for (const url of [expressUrl, `http://127.0.0.1:${(plugin.server.address() as AddressInfo).port}/`, `http://127.0.0.1:${(bare.server.address() as AddressInfo).port}/`]) {
      const refused = await fetch(url, { headers: { 'x-client': 'bot' } });
      expect(refused.status, url).toBe(403);
      expect(refused.headers.has('retry-after')).toBe(false);
      expect(await refused.text()).toMatch(/Forbidden/);
      expect((await fetch(url, { headers: { 'x-client': 'user' } })).status).toBe(200);
    }
    const pluginRefusal = await fetch(`http://127.0.0.1:${(plugin.server.address() as AddressInfo).port}/`, { headers: { 'x-client': 'bot' } });
    expect(await pluginRefusal.json()).toMatchObject({ statusCode: 403, code: 'SLUICE_DENIED' });
    expect(limiter.get('bot')).toBeNull();
  });
});

describe('shadow mode', () => {
  it('node:http: every request goes on, no field is sent, req.rateLimit says what the limiter decided, and it counted', async () => {
    const exceeded: number[] = [];
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock: new ManualClock(0) });
    const url = await nodeServer({ shadow: true, onExceeded: (_req: IncomingMessage, d: Decision) => exceeded.push(d.retryAfterMs) }, limiter);
    expect(await hit(url, 4)).toEqual([
      { status: 200, body: 'true:1', fields: false },
      { status: 200, body: 'true:0', fields: false },
      { status: 200, body: 'false:0', fields: false },
      { status: 200, body: 'false:0', fields: false },
    ]);
    expect(exceeded).toEqual([30_000, 30_000]);
    // The admissions were counted: the key has nothing left.
    expect(limiter.tryAcquire('127.0.0.1', 0).remaining).toBe(0);
  });

  it('Express: the same, through app.use', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const app = express();
    app.use(rateLimit({ limiter, shadow: true, key: () => 'k' }));
    app.get('/', (req, res) => {
      const d = (req as unknown as { rateLimit: Decision }).rateLimit;
      res.send(`${d.allowed}:${d.reason}`);
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    closers.push(() => new Promise((r) => server.close(r)));
    const answers = await hit(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, 3);
    expect(answers).toEqual([
      { status: 200, body: 'true:allowed', fields: false },
      { status: 200, body: 'false:limited', fields: false },
      { status: 200, body: 'false:limited', fields: false },
    ]);
  });

  it('Fastify: the plugin and the bare hook let every request on, with request.rateLimit', async () => {
    for (const mount of ['plugin', 'hook'] as const) {
      const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
      const app = Fastify();
      closers.push(() => app.close());
      if (mount === 'plugin') await app.register(sluice, { limiter, shadow: true });
      else app.addHook('onRequest', fastifyRateLimit({ limiter, shadow: true }));
      app.get('/', async (request) => {
        const d = (request as unknown as { rateLimit: Decision }).rateLimit;
        return `${d.allowed}:${d.remaining}`;
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const answers = await hit(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`, 3);
      expect(answers, mount).toEqual([
        { status: 200, body: 'true:0', fields: false },
        { status: 200, body: 'false:0', fields: false },
        { status: 200, body: 'false:0', fields: false },
      ]);
    }
  });

  it('Fastify without shadow: request.rateLimit holds each admitted request\'s decision', async () => {
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const app = Fastify();
    closers.push(() => app.close());
    await app.register(sluice, { limiter });
    app.get('/', async (request) => `${request.rateLimit?.remaining}`);
    app.get('/free', { config: { rateLimit: false } }, async (request) => `${request.rateLimit}`);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    expect((await hit(`${url}/`, 2)).map((a) => a.body)).toEqual(['2', '1']);
    expect((await hit(`${url}/free`, 1))[0]?.body).toBe('null');
  });
});
