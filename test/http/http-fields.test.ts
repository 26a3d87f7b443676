// The middleware's header modes (draft-6, -7, -8, -11 and the legacy X-RateLimit-* fields) and
// the forms of `message` (a string, an object, a function, an async one), on real node:http
// servers and a real Fastify app, driven by fetch. Limiters run on a ManualClock: every count
// and every wait is exact.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, ManualClock, perMinute, perSecond, RateLimiter, type Decision } from '../../src/index.js';
import { rateLimit, type RateLimitOptions } from '../../src/http/middleware.js';
import { fieldWriter } from '../../src/http/header-modes.js';
import { advertisePolicies, policyFields } from '../../src/http/headers.js';
import { RateLimitedError, sluice } from '../../src/http/fastify.js';

let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

/** A node:http server behind `handlers` (middleware, in turn): 'ok' when all pass, 500 and the error's message on next(error). */
async function serve(...handlers: ((req: IncomingMessage, res: ServerResponse, next: (e?: unknown) => void) => void)[]): Promise<string> {
  const server: Server = createServer((req, res) => {
    const run = (i: number): void => {
      const h = handlers[i];
      if (h === undefined) {
        res.end('ok');
        return;
      }
      h(req, res, (error) => {
        if (error !== undefined) {
          res.statusCode = 500;
          res.end(`error: ${(error as Error).message}`);
          return;
        }
        run(i + 1);
      });
    };
    run(0);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The answer's status, body, content type and every RateLimit-ish field. */
async function get(url: string): Promise<{ status: number; body: string; type: string | null; fields: Record<string, string> }> {
  const r = await fetch(url);
  const fields: Record<string, string> = {};
  r.headers.forEach((value, name) => {
    if (name.includes('ratelimit') || name === 'retry-after') fields[name] = value;
  });
  return { status: r.status, body: await r.text(), type: r.headers.get('content-type'), fields };
}

describe('header modes', () => {
  // perMinute(3): one request every 20 s, a burst of 3.
  async function twoRequests(mode: RateLimitOptions['headers']): Promise<Record<string, string>[]> {
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const url = await serve(rateLimit({ limiter, headers: mode }));
    return [(await get(url)).fields, (await get(url)).fields];
  }

  it('true and draft-11: policy items, r and t the wait for more quota', async () => {
    const expected = [
      { 'ratelimit-policy': '"3-per-60s";q=3;w=60', 'ratelimit': '"3-per-60s";r=2;t=20' },
      { 'ratelimit-policy': '"3-per-60s";q=3;w=60', 'ratelimit': '"3-per-60s";r=1;t=20' },
    ];
    expect(await twoRequests(true)).toEqual(expected);
    expect(await twoRequests('draft-11')).toEqual(expected);
  });

  it('draft-8: the same fields, t the wait until the limit is full', async () => {
    expect(await twoRequests('draft-8')).toEqual([
      { 'ratelimit-policy': '"3-per-60s";q=3;w=60', 'ratelimit': '"3-per-60s";r=2;t=20' },
      { 'ratelimit-policy': '"3-per-60s";q=3;w=60', 'ratelimit': '"3-per-60s";r=1;t=40' },
    ]);
  });

  it('draft-7: one RateLimit dictionary', async () => {
    expect(await twoRequests('draft-7')).toEqual([
      { 'ratelimit-policy': '3;w=60', 'ratelimit': 'limit=3, remaining=2, reset=20' },
      { 'ratelimit-policy': '3;w=60', 'ratelimit': 'limit=3, remaining=1, reset=40' },
    ]);
  });

  it('draft-6: a field each', async () => {
    expect(await twoRequests('draft-6')).toEqual([
      { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '20' },
      { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '1', 'ratelimit-reset': '40' },
    ]);
  });

  it('false: none but Retry-After on a refusal', async () => {
    const limiter = new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });
    const url = await serve(rateLimit({ limiter, headers: false }));
    expect((await get(url)).fields).toEqual({});
    expect((await get(url)).fields).toEqual({ 'retry-after': '60' });
  });

  it('legacyHeaders: X-RateLimit-Limit, -Remaining and -Reset (a Unix time, rounded up), beside the draft', async () => {
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const url = await serve(rateLimit({ limiter, legacyHeaders: true, headers: 'draft-7' }));
    const before = Date.now();
    const { fields } = await get(url);
    const after = Date.now();
    expect(fields).toMatchObject({ 'ratelimit': 'limit=3, remaining=2, reset=20', 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2' });
    const reset = Number(fields['x-ratelimit-reset']);
    expect(reset).toBeGreaterThanOrEqual(Math.ceil((before + 20_000) / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil((after + 20_000) / 1000));
    // Alone, with headers: false.
    const bare = await serve(rateLimit({ limiter: new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) }), legacyHeaders: true, headers: false }));
    expect(Object.keys((await get(bare)).fields).sort()).toEqual(['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']);
  });

  it('several limits: drafts 8 and 11 give an item each; 6, 7 and legacy give the binding one', async () => {
    const make = () => new RateLimiter({ limit: [perSecond(5), perMinute(20)], maxKeys: 16, clock: new ManualClock(0) });
    // Four requests at once: 5 per second has 1 left (one more in 200 ms, full in 800), 20 per
    // minute 16 (full in 12 s). The first binds: it has fewer left.
    const answers = async (headers: RateLimitOptions['headers']): Promise<Record<string, string>> => {
      const url = await serve(rateLimit({ limiter: make(), headers, legacyHeaders: true }));
      for (let i = 0; i < 3; i++) await get(url);
      return (await get(url)).fields;
    };
    expect(await answers('draft-11')).toMatchObject({ 'ratelimit': '"5-per-1s";r=1;t=1, "20-per-60s";r=16;t=3', 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '1' });
    expect(await answers('draft-8')).toMatchObject({ 'ratelimit': '"5-per-1s";r=1;t=1, "20-per-60s";r=16;t=12' });
    expect(await answers('draft-7')).toMatchObject({ 'ratelimit-policy': '5;w=1', 'ratelimit': 'limit=5, remaining=1, reset=1' });
    expect(await answers('draft-6')).toMatchObject({ 'ratelimit-limit': '5', 'ratelimit-remaining': '1', 'ratelimit-reset': '1' });
  });

  it('the binding limit: the fewest left, and of equals the longest reset', () => {
    const fields = policyFields(advertisePolicies([perSecond(5), perMinute(20)]));
    const write = fieldWriter('draft-6', true, () => 1_000_000) as NonNullable<ReturnType<typeof fieldWriter>>;
    const decision = (limits: { remaining: number; resetAfterMs: number }[]): Decision =>
      ({ allowed: false, remaining: 0, retryAfterMs: 100, resetAfterMs: 9_000, reason: 'limited', limits });
    expect(write(decision([{ remaining: 0, resetAfterMs: 500 }, { remaining: 0, resetAfterMs: 9_000 }]), fields)).toEqual([
      'ratelimit-policy', '20;w=60', 'ratelimit-limit', '20', 'ratelimit-remaining', '0', 'ratelimit-reset', '9',
      'x-ratelimit-limit', '20', 'x-ratelimit-remaining', '0', 'x-ratelimit-reset', '1009',
    ]);
    expect(write(decision([{ remaining: 2, resetAfterMs: 500 }, { remaining: 3, resetAfterMs: 9_000 }]), fields)[1]).toBe('5;w=1');
    expect(write.stacking).toBe(0);
    expect(fieldWriter('draft-8', false)?.stacking).toBe(2);
    expect(fieldWriter(null, false)).toBeNull();
  });

  it('two limiters on one response: draft-11 lists add up, draft-7 fields are the later limiter\'s', async () => {
    const a = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const b = new RateLimiter({ limit: perSecond(10), maxKeys: 16, clock: new ManualClock(0) });
    const lists = await serve(rateLimit({ limiter: a }), rateLimit({ limiter: b }));
    expect((await get(lists)).fields['ratelimit']).toBe('"3-per-60s";r=2;t=20, "10-per-1s";r=9;t=1');
    const c = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock: new ManualClock(0) });
    const d = new RateLimiter({ limit: perSecond(10), maxKeys: 16, clock: new ManualClock(0) });
    const dicts = await serve(rateLimit({ limiter: c, headers: 'draft-7' }), rateLimit({ limiter: d, headers: 'draft-7' }));
    expect((await get(dicts)).fields['ratelimit']).toBe('limit=10, remaining=9, reset=1');
  });
});

describe('message', () => {
  const refusing = () => new RateLimiter({ limit: perMinute(1), maxKeys: 16, clock: new ManualClock(0) });

  it('a string is plain text (the default too)', async () => {
    const url = await serve(rateLimit({ limiter: refusing(), message: 'slow down\n' }));
    await get(url);
    expect(await get(url)).toMatchObject({ status: 429, body: 'slow down\n', type: 'text/plain; charset=utf-8' });
    const plain = await serve(rateLimit({ limiter: refusing() }));
    await get(plain);
    expect(await get(plain)).toMatchObject({ body: 'Too Many Requests: retry later.\n', type: 'text/plain; charset=utf-8' });
  });

  it('an object is JSON', async () => {
    const url = await serve(rateLimit({ limiter: refusing(), message: { error: 'rate_limited', docs: 'https://example.com/limits' } }));
    await get(url);
    const r = await get(url);
    expect(r).toMatchObject({ status: 429, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(r.body)).toEqual({ error: 'rate_limited', docs: 'https://example.com/limits' });
  });

  it('a function of the request and the decision, sync or async, gives either form per refusal', async () => {
    const seen: [string | undefined, number][] = [];
    const url = await serve(rateLimit({
      limiter: refusing(),
      message: (req: IncomingMessage, d: Decision) => {
        seen.push([req.url, d.retryAfterMs]);
        return `wait ${d.retryAfterMs / 1000} s`;
      },
    }));
    await get(url);
    expect(await get(`${url}/x`)).toMatchObject({ status: 429, body: 'wait 60 s', type: 'text/plain; charset=utf-8' });
    expect(seen).toEqual([['/x', 60_000]]);
    const asyncUrl = await serve(rateLimit({ limiter: refusing(), message: async (_req: IncomingMessage, d: Decision) => ({ retryAfterMs: d.retryAfterMs }) }));
    await get(asyncUrl);
    const r = await get(asyncUrl);
    expect(r).toMatchObject({ status: 429, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(r.body)).toEqual({ retryAfterMs: 60_000 });
  });

  it('a function that throws, rejects or gives neither form: the error goes to next, nothing is sent', async () => {
    for (const [message, error] of [
      [() => { throw new Error('no body'); }, 'error: no body'],
      [async () => Promise.reject(new Error('late')), 'error: late'],
      [() => 42, 'error: options.message() must be a string, an object, or a function (req, decision) returning one, got 42'],
    ] as const) {
      const url = await serve(rateLimit({ limiter: refusing(), message: message as () => string }));
      await get(url);
      expect(await get(url)).toMatchObject({ status: 500, body: error, fields: { 'retry-after': '60' } });
    }
  });

  it('in Fastify: the bare hook sends the object as JSON; the plugin hands it to setErrorHandler on the error', async () => {
    const hooked = Fastify();
    closers.push(() => hooked.close());
    hooked.addHook('onRequest', fastifyRateLimit({ limiter: refusing(), message: { error: 'rate_limited' }, headers: 'draft-6' }));
    hooked.get('/', async () => 'ok');
    await hooked.listen({ port: 0, host: '127.0.0.1' });
    const hookUrl = `http://127.0.0.1:${(hooked.server.address() as AddressInfo).port}`;
    expect((await get(hookUrl)).fields).toMatchObject({ 'ratelimit-limit': '1', 'ratelimit-remaining': '0' });
    const refused = await get(hookUrl);
    expect(refused).toMatchObject({ status: 429, type: 'application/json; charset=utf-8' });
    expect(JSON.parse(refused.body)).toEqual({ error: 'rate_limited' });

    const app: FastifyInstance = Fastify();
    closers.push(() => app.close());
    app.setErrorHandler((error, _request, reply) => {
      if (error instanceof RateLimitedError) return reply.code(error.statusCode).send(error.body);
      return reply.code(500).send(String(error));
    });
    await app.register(sluice, { limiter: refusing(), message: async (_request, d) => ({ retryAfterMs: d.retryAfterMs }) });
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    await get(url);
    const r = await get(url);
    expect(r.status).toBe(429);
    expect(JSON.parse(r.body)).toEqual({ retryAfterMs: 60_000 });
  });
});
