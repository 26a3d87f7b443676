import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  fastifyRateLimit, rateLimit, rateLimitHeaders, type FastifyOnRequestHook, type FastifyReplyLike, type RateLimitHandler,
} from '../../src/http/index.js';
import {
  ManualClock, perHour, perMinute, perSecond, PolicyLimiter, RateLimiter, type Decision, type Limit, type PolicyRule,
} from '../../src/index.js';

// Every server listens on 127.0.0.1, port 0, and is closed after its test. Every test sends a
// handful of requests over loopback with the global fetch.

const servers: Server[] = [];

afterEach(async () => {
  const open = servers.splice(0);
  await Promise.all(open.map((server) => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  })));
});

/** Serves `limit` on 127.0.0.1 at a free port, before a handler answering 200 "ok" (or 500 with the error). */
async function serveLimited(limit: RateLimitHandler): Promise<{ url: string; handled: () => number }> {
  let handled = 0;
  const server = createServer((req, res) => limit(req, res, (error?: unknown) => {
    if (error !== undefined) {
      res.statusCode = 500;
      res.end(`error: ${(error as Error).message}`);
      return;
    }
    handled++;
    res.end('ok');
  }));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, handled: () => handled };
}

interface Reply {
  status: number;
  body: string;
  policy: string | null;
  rateLimit: string | null;
  retryAfter: string | null;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(url, { headers });
  return {
    status: res.status,
    body: await res.text(),
    policy: res.headers.get('ratelimit-policy'),
    rateLimit: res.headers.get('ratelimit'),
    retryAfter: res.headers.get('retry-after'),
  };
}

function decision(fields: Partial<Decision>): Decision {
  return { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'allowed', ...fields };
}

/** One Structured Field List member: a String with Integer parameters (RFC 9651). */
const SF_ITEM = /^"[\x20-\x21\x23-\x5b\x5d-\x7e]*"(;[a-z*][a-z0-9_.*-]*=\d{1,15})+$/;

describe('rateLimitHeaders()', () => {
  it('reports an allowed decision: policy q and w, r remaining, t seconds until one more request', () => {
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 4, clock: new ManualClock() });
    const d = limiter.tryAcquire('k', 3); // 300 ms of debt
    expect(d).toMatchObject({ allowed: true, remaining: 7, resetAfterMs: 300 });
    expect(rateLimitHeaders(d, perSecond(10))).toEqual({
      'ratelimit-policy': '"10-per-1s";q=10;w=1',
      'ratelimit': '"10-per-1s";r=7;t=1',
    });
  });

  it('reports a refusal with Retry-After; t, the time until one more request, equals it for a cost of 1', () => {
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 4, clock: new ManualClock() });
    for (let i = 0; i < 3; i++) limiter.tryAcquire('k');
    const d = limiter.tryAcquire('k');
    expect(d).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 20_000, resetAfterMs: 60_000 });
    expect(rateLimitHeaders(d, perMinute(3))).toEqual({
      'ratelimit-policy': '"3-per-60s";q=3;w=60',
      'ratelimit': '"3-per-60s";r=0;t=20',
      'retry-after': '20',
    });
  });

  it.each([
    [1, '1'],
    [999.5, '1'],
    [1000, '1'],
    [1000.001, '2'],
    [1001, '2'],
    [59_001, '60'],
    [0, '1'], // a refusal never says "now"
  ])('rounds Retry-After up: %f ms -> %s s', (retryAfterMs, expected) => {
    const h = rateLimitHeaders(decision({ allowed: false, retryAfterMs, resetAfterMs: 60_000, reason: 'limited' }), perMinute(3));
    expect(h['retry-after']).toBe(expected);
    // t is about the limit (one more request in 60 - 2 x 20 s), Retry-After about this request.
    expect(h.ratelimit).toBe('"3-per-60s";r=0;t=20');
  });

  it('omits Retry-After when the request can never pass (cost over the burst)', () => {
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 4, clock: new ManualClock() });
    const d = limiter.tryAcquire('k', 11);
    expect(d).toMatchObject({ allowed: false, reason: 'exceeds-burst', retryAfterMs: Infinity });
    expect(rateLimitHeaders(d, perSecond(10))).toEqual({
      'ratelimit-policy': '"10-per-1s";q=10;w=1',
      'ratelimit': '"10-per-1s";r=10;t=0',
    });
  });

  it("Decision.limits: each key limit's own numbers, not the global cap's; absent with one limit", () => {
    const clock = new ManualClock();
    const capped = new RateLimiter({ limit: [perSecond(5), perMinute(20)], globalLimit: perSecond(2), maxKeys: 4, clock });
    expect(capped.tryAcquire('a').limits).toEqual([{ remaining: 4, resetAfterMs: 200 }, { remaining: 19, resetAfterMs: 3_000 }]);
    expect(capped.tryAcquire('b').limits).toEqual([{ remaining: 4, resetAfterMs: 200 }, { remaining: 19, resetAfterMs: 3_000 }]);
    const refused = capped.tryAcquire('c'); // the cap (2 per second) refuses: c's limits are untouched
    expect(refused).toMatchObject({ allowed: false, reason: 'global-limit', limits: [{ remaining: 5, resetAfterMs: 0 }, { remaining: 20, resetAfterMs: 0 }] });
    const windows = new RateLimiter({ limit: [perSecond(5), perMinute(20)], algorithm: 'fixed-window', maxKeys: 4, clock });
    expect(windows.tryAcquire('k').limits?.map((l) => l.remaining)).toEqual([4, 19]);
    expect(new RateLimiter({ limit: perSecond(5), maxKeys: 4, clock }).tryAcquire('k').limits).toBeUndefined();
    const policy = new PolicyLimiter({ rules: [{ limit: [perSecond(5), perMinute(20)] }], maxKeys: 4, clock });
    expect(policy.tryAcquire({ user: 'u', api: 'a' }).limits?.map((l) => l.remaining)).toEqual([4, 19]);
  });

  it('gives several limits one policy item each, each with its own r and t', () => {
    const limits = [perSecond(5), perMinute(20)];
    const limiter = new RateLimiter({ limit: limits, maxKeys: 4, clock: new ManualClock() });
    for (let i = 0; i < 4; i++) limiter.tryAcquire('k');
    const d = limiter.tryAcquire('k');
    expect(d).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 15_000, limits: [{ remaining: 0, resetAfterMs: 1_000 }, { remaining: 15, resetAfterMs: 15_000 }] });
    const h = rateLimitHeaders(d, limits);
    // 5 per second: one more in 1 s - 4 x 200 ms; 20 per minute: in 15 s - 4 x 3 s.
    expect(h).toEqual({
      'ratelimit-policy': '"5-per-1s";q=5;w=1, "20-per-60s";q=20;w=60',
      'ratelimit': '"5-per-1s";r=0;t=1, "20-per-60s";r=15;t=3',
    });
    for (const field of [h['ratelimit-policy'], h.ratelimit]) {
      for (const item of field.split(', ')) expect(item).toMatch(SF_ITEM);
    }
  });

  it.each<[string, Limit, string]>([
    ['perSecond(10)', perSecond(10), '"10-per-1s";q=10;w=1'],
    ['perHour(1000)', perHour(1000), '"1000-per-3600s";q=1000;w=3600'],
    ['a burst below the rate', perSecond(10, { burst: 2 }), '"10-per-1s";q=10;w=1;sluice-burst=2'],
    ['a burst above the rate', perMinute(60, { burst: 100 }), '"60-per-60s";q=60;w=60;sluice-burst=100'],
    ['5 per 500 ms', { permits: 5, periodMs: 500 }, '"10-per-1s";q=10;w=1;sluice-burst=5'],
    ['3 per 1,500 ms', { permits: 3, periodMs: 1500 }, '"4-per-2s";q=4;w=2;sluice-burst=3'],
    ['half a request per second', { permits: 0.5, periodMs: 1000 }, '"1-per-2s";q=1;w=2'],
  ])('advertises the sustained rate in whole seconds: %s', (_, limit, item) => {
    expect(rateLimitHeaders(decision({}), limit)['ratelimit-policy']).toBe(item);
    expect(item).toMatch(SF_ITEM);
  });

  it('keeps policy names distinct when two limits advertise the same rate', () => {
    const states = [{ remaining: 10, resetAfterMs: 0 }, { remaining: 1, resetAfterMs: 0 }];
    const h = rateLimitHeaders(decision({ remaining: 1, limits: states }), [perSecond(10), perSecond(10, { burst: 1 })]);
    expect(h['ratelimit-policy']).toBe('"10-per-1s";q=10;w=1, "10-per-1s-2";q=10;w=1;sluice-burst=1');
    expect(h.ratelimit).toBe('"10-per-1s";r=10;t=0, "10-per-1s-2";r=1;t=0');
  });

  // Found: a decision of several limits without their states (a Redis limiter's) gave every item
  // its fewest left and its longest reset: one limit's numbers on another's item.
  it('several limits, a decision without a state per limit: one item for the limits together', () => {
    const limits = [perMinute(3), perHour(5)];
    const h = rateLimitHeaders(decision({ remaining: 2, resetAfterMs: 719_999.5 }), limits);
    expect(h['ratelimit-policy']).toBe('"3-per-60s";q=3;w=60, "5-per-3600s";q=5;w=3600');
    expect(h.ratelimit).toBe('"3-per-60s+5-per-3600s";r=2;t=720');
    expect(h.ratelimit).toMatch(SF_ITEM);
    // The fewest left is the smallest capacity: no more comes, whatever the wait until every limit is full.
    expect(rateLimitHeaders(decision({ remaining: 3, resetAfterMs: 300_000 }), limits).ratelimit).toBe('"3-per-60s+5-per-3600s";r=3;t=0');
  });

  it.each<[string, unknown, unknown, ErrorConstructor, RegExp]>([
    ['no decision', undefined, perSecond(1), TypeError, /^decision must be a Decision .*got undefined$/],
    ['allowed not a boolean', { ...decision({}), allowed: 'yes' }, perSecond(1), TypeError, /^decision\.allowed must be a boolean, got "yes"$/],
    ['remaining missing', { allowed: true, retryAfterMs: 0, resetAfterMs: 0 }, perSecond(1), TypeError, /^decision\.remaining must be a number, got undefined$/],
    ['remaining negative', decision({ remaining: -1 }), perSecond(1), RangeError, /^decision\.remaining must be a finite number >= 0, got -1$/],
    ['resetAfterMs NaN', decision({ resetAfterMs: NaN }), perSecond(1), RangeError, /^decision\.resetAfterMs .* got NaN$/],
    ['retryAfterMs negative', decision({ retryAfterMs: -5 }), perSecond(1), RangeError, /^decision\.retryAfterMs must be a number >= 0, got -5$/],
    ['no limit', decision({}), null, TypeError, /^limit must be a Limit .*got null$/],
    ['limit a number', decision({}), 10, TypeError, /^limit must be a Limit .*got 10$/],
    ['empty limits', decision({}), [], RangeError, /^limit must hold at least one Limit, got an empty array$/],
    ['bad permits', decision({}), { permits: 0, periodMs: 1000 }, RangeError, /^limit\.permits must be a positive finite number, got 0$/],
    ['bad period in a list', decision({}), [perSecond(1), { permits: 1, periodMs: '1s' }], TypeError, /^limit\[1\]\.periodMs must be a number, got "1s"$/],
    ['bad burst', decision({}), { permits: 1, periodMs: 1000, burst: 0.5 }, RangeError, /^limit\.burst must be at least 1, got 0\.5$/],
    // Found: a 2-limit decision under 1 limit gave 1 item without complaint.
    ['a 2-limit decision, 1 limit', { ...decision({}), limits: [{ remaining: 0, resetAfterMs: 0 }, { remaining: 1, resetAfterMs: 0 }] }, perSecond(1), RangeError,
      /^decision\.limits must hold one state per limit \(1\), got 2 limit states: pass the limits the decision was made under$/],
    ['a 1-limit state, 2 limits', { ...decision({}), limits: [{ remaining: 0, resetAfterMs: 0 }] }, [perSecond(1), perMinute(5)], RangeError,
      /^decision\.limits must hold one state per limit \(2\), got 1 limit states/],
    ['limits not an array', { ...decision({}), limits: 3 }, perSecond(1), RangeError, /^decision\.limits must hold one state per limit \(1\), got 3/],
  ])('throws for bad arguments, naming them: %s', (_, d, limit, type, message) => {
    const call = () => rateLimitHeaders(d as Decision, limit as Limit);
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });
});

describe('rateLimit() on a node:http server', () => {
  it('sets the fields on allowed responses and answers 429 with Retry-After beyond the limit', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock });
    const shadow = new RateLimiter({ limit: perMinute(3), maxKeys: 16, clock }); // same requests, same clock
    const { url, handled } = await serveLimited(rateLimit({ limiter }));
    const policy = '"3-per-60s";q=3;w=60';

    for (const [r, t] of [[2, 20], [1, 20], [0, 20]]) { // one more request every 20 s
      const reply = await get(url);
      const expected = rateLimitHeaders(shadow.tryAcquire('127.0.0.1'), perMinute(3));
      expect(reply).toEqual({ status: 200, body: 'ok', policy, rateLimit: `"3-per-60s";r=${r};t=${t}`, retryAfter: null });
      expect(reply.rateLimit).toBe(expected.ratelimit);
    }

    clock.advance(1_500); // the refused request waits 18.5 s: Retry-After rounds up to 19
    const refused = await get(url);
    const d = shadow.tryAcquire('127.0.0.1');
    expect(d).toMatchObject({ allowed: false, retryAfterMs: 18_500 });
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe(String(Math.ceil(d.retryAfterMs / 1000)));
    expect(refused.retryAfter).toBe('19');
    expect(refused.rateLimit).toBe('"3-per-60s";r=0;t=19');
    expect(refused.policy).toBe(policy);
    expect(refused.body).toMatch(/^Too Many Requests/);
    expect(handled()).toBe(3); // next() was not called for the refused request

    // The default key is the client address: that key, and no other, was spent.
    expect(limiter.tryAcquire('127.0.0.1', 0).remaining).toBe(0);
    clock.advance(18_500);
    expect((await get(url)).status).toBe(200);
    expect(handled()).toBe(4);
  });

  it('answers 429 as plain text', async () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock: new ManualClock() });
    const { url } = await serveLimited(rateLimit({ limiter }));
    await get(url);
    const res = await fetch(url);
    expect(res.status).toBe(429);
    expect(res.statusText).toBe('Too Many Requests');
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await res.text()).toBe('Too Many Requests: retry later.\n');
  });

  it('spends from the key a custom key function returns, at the cost given', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 16, clock });
    const limit = rateLimit({
      limiter,
      key: (req) => String(req.headers['x-api-key'] ?? 'anonymous'),
      cost: (req) => (req.url === '/expensive' ? 3 : 1),
    });
    const { url } = await serveLimited(limit);
    expect((await get(`${url}/expensive`, { 'x-api-key': 'alpha' })).rateLimit).toBe('"5-per-1s";r=2;t=1');
    expect((await get(url, { 'x-api-key': 'alpha' })).rateLimit).toBe('"5-per-1s";r=1;t=1');
    expect((await get(`${url}/expensive`, { 'x-api-key': 'alpha' })).status).toBe(429);
    expect((await get(`${url}/expensive`, { 'x-api-key': 'beta' })).status).toBe(200); // another key, its own budget
    expect(limiter.tryAcquire('alpha', 0).remaining).toBe(1);
    expect(limiter.tryAcquire('beta', 0).remaining).toBe(2);
    expect(limiter.tryAcquire('127.0.0.1', 0).remaining).toBe(5); // the address was never the key
  });

  it('works with a PolicyLimiter: key returns { user, api } and the fields follow the matched rule', async () => {
    const clock = new ManualClock();
    const rules: PolicyRule[] = [
      { limit: perSecond(2) },
      { api: '/search', limit: perMinute(3) },
      { user: 'alice', limit: [perSecond(5), perMinute(100)] },
    ];
    const limiter = new PolicyLimiter({ rules, maxKeys: 64, clock });
    const limit = rateLimit({ limiter, key: (req) => ({ user: String(req.headers['x-user']), api: req.url ?? '/' }) });
    const { url } = await serveLimited(limit);

    const bob = { 'x-user': 'bob' };
    expect(await get(`${url}/search`, bob)).toMatchObject({ status: 200, policy: '"3-per-60s";q=3;w=60', rateLimit: '"3-per-60s";r=2;t=20' });
    expect(await get(`${url}/upload`, bob)).toMatchObject({ status: 200, policy: '"2-per-1s";q=2;w=1', rateLimit: '"2-per-1s";r=1;t=1' });
    expect(await get(`${url}/upload`, { 'x-user': 'alice' })).toMatchObject({
      policy: '"5-per-1s";q=5;w=1, "100-per-60s";q=100;w=60',
      rateLimit: '"5-per-1s";r=4;t=1, "100-per-60s";r=99;t=1',
    });
    await get(`${url}/search`, bob);
    await get(`${url}/search`, bob);
    expect(await get(`${url}/search`, bob)).toMatchObject({ status: 429, retryAfter: '20', rateLimit: '"3-per-60s";r=0;t=20' });

    // New rules from any thread: the next response advertises them.
    limiter.setRules([...rules, { user: 'bob', api: '/upload', limit: perMinute(30) }]);
    expect((await get(`${url}/upload`, bob)).policy).toBe('"30-per-60s";q=30;w=60');
  });

  it('sets no RateLimit fields with headers: false, but still Retry-After on a 429', async () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock: new ManualClock() });
    const { url } = await serveLimited(rateLimit({ limiter, headers: false }));
    expect(await get(url)).toEqual({ status: 200, body: 'ok', policy: null, rateLimit: null, retryAfter: null });
    expect(await get(url)).toMatchObject({ status: 429, policy: null, rateLimit: null, retryAfter: '1' });
  });

  it('advertises window algorithms without sluice-burst', async () => {
    const limiter = new RateLimiter({ limit: perSecond(10), algorithm: 'fixed-window', maxKeys: 16, clock: new ManualClock() });
    const { url } = await serveLimited(rateLimit({ limiter }));
    expect((await get(url)).policy).toBe('"10-per-1s";q=10;w=1');
  });

  it('passes an error from the key function to next(error) and sends nothing itself', async () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock: new ManualClock() });
    const { url, handled } = await serveLimited(rateLimit({ limiter, key: () => '' }));
    const reply = await get(url);
    expect(reply).toMatchObject({ status: 500, policy: null, body: 'error: key must be a non-empty string, got ""' });
    expect(handled()).toBe(0);
  });

  it.each<[string, (limiter: RateLimiter) => unknown, ErrorConstructor, RegExp]>([
    ['no options', () => undefined, TypeError, /^rateLimit options must be an object like \{ limiter \}, got undefined$/],
    ['no limiter', () => ({}), TypeError, /^options\.limiter must be a RateLimiter, a PolicyLimiter, a RedisRateLimiter or a RedisPolicyLimiter, got undefined$/],
    ['a limiter of another kind', () => ({ limiter: { tryAcquire() {} } }), TypeError, /^options\.limiter .* got an object$/],
    ['negative cost', (limiter) => ({ limiter, cost: -1 }), RangeError, /^options\.cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got -1$/],
    ['cost a string', (limiter) => ({ limiter, cost: '1' }), TypeError, /^options\.cost .* got "1"$/],
    ['key not a function', (limiter) => ({ limiter, key: 'ip' }), TypeError, /^options\.key must be a function of the request, got "ip"$/],
    ['headers neither a boolean nor a draft', (limiter) => ({ limiter, headers: 'yes' }), TypeError,
      /^options\.headers must be true, false, 'draft-6', 'draft-7', 'draft-8' or 'draft-11', got "yes"$/],
    ['headers an unknown draft', (limiter) => ({ limiter, headers: 'draft-5' }), TypeError, /^options\.headers must be .* got "draft-5"$/],
    ['legacyHeaders not a boolean', (limiter) => ({ limiter, legacyHeaders: 1 }), TypeError, /^options\.legacyHeaders must be a boolean, got 1$/],
    // Found: the limiter was checked after the options that read it, and null was taken for false.
    ['a limiter that is none, with skipFailedRequests', () => ({ limiter: {}, skipFailedRequests: true }), TypeError, /^options\.limiter must be a RateLimiter, .* got an object$/],
    ['a limiter that is none, with ban', () => ({ limiter: {}, ban: 3 }), TypeError, /^options\.limiter must be a RateLimiter, .* got an object$/],
    ['shadow null', (limiter) => ({ limiter, shadow: null }), TypeError, /^options\.shadow must be a boolean, got null$/],
    ['skipFailedRequests null', (limiter) => ({ limiter, skipFailedRequests: null }), TypeError, /^options\.skipFailedRequests must be a boolean, got null$/],
    ['skipSuccessfulRequests null', (limiter) => ({ limiter, skipSuccessfulRequests: null }), TypeError, /^options\.skipSuccessfulRequests must be a boolean, got null$/],
    ['legacyHeaders null', (limiter) => ({ limiter, legacyHeaders: null }), TypeError, /^options\.legacyHeaders must be a boolean, got null$/],
    ['message a number', (limiter) => ({ limiter, message: 429 }), TypeError,
      /^options\.message must be a string, an object, or a function \(req, decision\) returning one, got 429$/],
    ['message null', (limiter) => ({ limiter, message: null }), TypeError, /^options\.message must be a string, an object, .* got null$/],
    ['message an object JSON cannot write', (limiter) => ({ limiter, message: { n: 1n } }), TypeError, /^options\.message must be an object JSON can write: /],
  ])('throws at once for bad options: %s', (_, options, type, message) => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 4 });
    const call = () => rateLimit(options(limiter) as never);
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });

  it('requires key with a PolicyLimiter', () => {
    const limiter = new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 4 });
    expect(() => rateLimit({ limiter } as never)).toThrow(/^options\.key is required with a PolicyLimiter/);
  });
});

// Fastify is not installed: the hook is written against Fastify's documented onRequest
// signature, (request, reply, done), and driven here with a minimal fake request and reply.
describe('fastifyRateLimit()', () => {
  interface FakeReply extends FastifyReplyLike {
    statusCode: number;
    headers: Record<string, string>;
    payload: string | undefined;
  }

  function fakeReply(): FakeReply {
    const reply: FakeReply = {
      statusCode: 200,
      headers: {},
      payload: undefined,
      code(status) { reply.statusCode = status; return reply; },
      header(name, value) { reply.headers[name] = value; return reply; },
      send(payload) { reply.payload = payload; return reply; },
    };
    return reply;
  }

  function run<Req>(hook: FastifyOnRequestHook<Req>, request: Req) {
    const reply = fakeReply();
    const done: unknown[][] = [];
    hook(request, reply, (...args: unknown[]) => { done.push(args); });
    return { reply, done };
  }

  it('sets the fields and calls done() when allowed; replies 429 without done when refused', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perMinute(2), maxKeys: 16, clock });
    const hook = fastifyRateLimit({ limiter });

    const first = run(hook, { ip: '10.0.0.1' });
    expect(first.done).toEqual([[]]);
    expect(first.reply.statusCode).toBe(200);
    expect(first.reply.headers).toEqual({ 'ratelimit-policy': '"2-per-60s";q=2;w=60', 'ratelimit': '"2-per-60s";r=1;t=30' });

    run(hook, { ip: '10.0.0.1' });
    clock.advance(100);
    const refused = run(hook, { ip: '10.0.0.1' });
    expect(refused.done).toEqual([]);
    expect(refused.reply.statusCode).toBe(429);
    expect(refused.reply.payload).toBe('Too Many Requests: retry later.\n');
    expect(refused.reply.headers).toMatchObject({
      'retry-after': '30', // 29.9 s, rounded up
      'ratelimit': '"2-per-60s";r=0;t=30',
      'content-type': 'text/plain; charset=utf-8',
    });
    expect(run(hook, { ip: '10.0.0.2' }).done).toEqual([[]]); // request.ip is the default key
  });

  it('takes a key of the Fastify request, headers: false, and passes errors to done(error)', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 16, clock: new ManualClock() });
    const hook = fastifyRateLimit<{ ip?: string; user: string }>({ limiter, key: (request) => request.user, headers: false });
    expect(run(hook, { user: 'u1' }).reply.headers).toEqual({});
    expect(run(hook, { user: 'u1' }).reply).toMatchObject({ statusCode: 429, headers: { 'retry-after': '1' } });
    const failed = run(hook, { user: '' });
    expect(failed.done).toHaveLength(1);
    expect(failed.done[0]?.[0]).toBeInstanceOf(TypeError);
    expect(failed.reply.payload).toBeUndefined();
  });
});

describe('examples/http-server.js', () => {
  it('runs: three requests pass with the fields, the fourth gets 429 and Retry-After', async () => {
    const child = spawn(process.execPath, ['examples/http-server.js'], {
      cwd: new URL('../../', import.meta.url), env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const found = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (found) resolve(found[1] as string);
        });
        child.once('exit', (code) => reject(new Error(`the example exited with ${code}: ${out}`)));
      });
      const replies = [];
      for (let i = 0; i < 4; i++) replies.push(await get(url));
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
      expect(replies.map((r) => r.policy)).toEqual(Array(4).fill('"3-per-60s";q=3;w=60'));
      expect(replies[0]?.rateLimit).toBe('"3-per-60s";r=2;t=20');
      const retryAfter = Number(replies[3]?.retryAfter);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(20);
      expect(replies[3]?.rateLimit).toBe(`"3-per-60s";r=0;t=${retryAfter}`);
    } finally {
      child.kill();
    }
  });
});

