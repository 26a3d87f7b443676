// ban and onBanReach (http/ban.ts), as @fastify/rate-limit's: a client refused more than `ban`
// times within a period is answered 403 instead. On a real Express 5 app, the Fastify 5 plugin
// and the bare Fastify hook, driven by fetch; the limiters (and so the ban counters) run on a
// ManualClock: every count is exact.
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, ManualClock, perMinute, PolicyLimiter, RateLimiter } from '../../src/index.js';
import { rateLimit } from '../../src/http/middleware.js';
import { sluice } from '../../src/http/fastify.js';

let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

const client = (headers: Record<string, unknown>): string => String(headers['x-client']);

async function expressApp(options: Record<string, unknown>, limiter: RateLimiter): Promise<string> {
  const app = express();
  app.use(rateLimit({ limiter, key: (req) => client(req.headers), ...options }));
  app.get('/', (_req, res) => void res.send('ok'));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

async function fastifyPlugin(options: Record<string, unknown>, limiter: RateLimiter): Promise<string> {
  const app = Fastify();
  await app.register(sluice, { limiter, key: (request) => client(request.headers), ...options });
  app.get('/', async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`;
}

async function fastifyHook(options: Record<string, unknown>, limiter: RateLimiter): Promise<string> {
  const app = Fastify();
  app.addHook('onRequest', fastifyRateLimit({ limiter, key: (request) => client((request as unknown as { headers: Record<string, unknown> }).headers), ...options }));
  app.get('/', async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`;
}

const statuses = async (url: string, who: string, n: number): Promise<number[]> => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await fetch(url, { headers: { 'x-client': who } })).status);
  return out;
};

describe.each([
  ['Express', expressApp],
  ['the Fastify plugin', fastifyPlugin],
  ['the bare Fastify hook', fastifyHook],
] as const)('ban on %s', (_name, serve) => {
  it('a client refused more than `ban` times in the period gets 403 and onBanReach; others are not touched; it ends with the period', async () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock });
    const reached: string[] = [];
    const url = await serve({ ban: 3, onBanReach: (_req: unknown, key: string) => reached.push(key) }, limiter);
    // 2 admitted, 3 refusals counted (429), then banned (403) while refusals keep coming.
    expect(await statuses(url, 'eve', 7)).toEqual([200, 200, 429, 429, 429, 403, 403]);
    expect(reached).toEqual(['eve', 'eve']);
    expect(await statuses(url, 'bob', 3)).toEqual([200, 200, 429]);
    const banned = await fetch(url, { headers: { 'x-client': 'eve' } });
    expect(banned.status).toBe(403);
    expect(banned.headers.has('retry-after')).toBe(false);
    clock.advance(60_000); // a period later: the limit and the ban's count have both drained
    expect(await statuses(url, 'eve', 4)).toEqual([200, 200, 429, 429]);
  });
});

describe('ban', () => {
  it("the Fastify plugin's 403 says SLUICE_BANNED; a deny-listed key's says SLUICE_DENIED", async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const url = await fastifyPlugin({ ban: 1, denyList: ['bot'] }, limiter);
    expect(await statuses(url, 'eve', 2)).toEqual([200, 429]);
    const banned = await fetch(url, { headers: { 'x-client': 'eve' } });
    expect(banned.status).toBe(403);
    expect(await banned.json()).toMatchObject({ statusCode: 403, code: 'SLUICE_BANNED' });
    expect(await (await fetch(url, { headers: { 'x-client': 'bot' } })).json()).toMatchObject({ code: 'SLUICE_DENIED' });
  });

  it('in shadow mode a banned request goes on, and onBanReach and onExceeded still see it', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const events: string[] = [];
    const url = await expressApp({
      shadow: true, ban: 1, onBanReach: (_req: unknown, key: string) => events.push(`ban ${key}`), onExceeded: () => events.push('exceeded'),
    }, limiter);
    expect(await statuses(url, 'eve', 3)).toEqual([200, 200, 200]);
    expect(events).toEqual(['exceeded', 'ban eve', 'exceeded']);
  });

  it('{ after, periodMs } sets the period; with a PolicyLimiter it is required', async () => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock });
    const url = await expressApp({ ban: { after: 1, periodMs: 1_000 } }, limiter);
    expect(await statuses(url, 'eve', 3)).toEqual([200, 429, 403]);
    clock.advance(1_000); // the ban's count drained; the limit has not
    expect(await statuses(url, 'eve', 2)).toEqual([429, 403]);
    const policy = new PolicyLimiter({ rules: [{ limit: perMinute(2) }], maxKeys: 16, clock });
    expect(() => rateLimit({ limiter: policy, key: () => ({ user: 'u', api: 'a' }), ban: 2 })).toThrow(/options\.ban must be \{ after, periodMs \} with a PolicyLimiter/);
    expect(() => rateLimit({ limiter: policy, key: () => ({ user: 'u', api: 'a' }), ban: { after: 2, periodMs: 60_000 } })).not.toThrow();
  });

  it.each([
    [{ ban: 0 }, RangeError, /^options\.ban must be an integer from 1 to 1000000000, got 0$/],
    [{ ban: 1.5 }, RangeError, /^options\.ban must be an integer/],
    [{ ban: '3' }, TypeError, /^options\.ban must be a number of refusals or \{ after, periodMs \}, got "3"$/],
    [{ ban: { after: 2, period: 5 } }, TypeError, /period/],
    [{ ban: { after: 2, periodMs: -1 } }, RangeError, /^options\.ban\.periodMs must be a positive finite number, got -1$/],
    [{ ban: 2, onBanReach: 'log' }, TypeError, /^options\.onBanReach must be a function \(req, key\), got "log"$/],
    [{ onBanReach: () => {} }, TypeError, /^options\.onBanReach is called only with options\.ban/],
  ])('refuses %j by name', (options, type, message) => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16 });
    expect(() => rateLimit({ limiter, ...(options as object) })).toThrow(type);
    expect(() => rateLimit({ limiter, ...(options as object) })).toThrow(message);
  });
});
