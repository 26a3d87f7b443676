// The HTTP adapters where a decision settles later than the request's own turn, or a function of
// the options gives something unusual: a throw in the continuation after an async decision, a
// thenable that is not a native promise (another realm's promise, a Bluebird- or Mongoose-style
// object with a `then`), a throw or rejection with a value Express's next reads as "no error", a
// connection that closed before the decision was applied, and a hook that throws after an
// admission whose spend may come back. On real Express 4, Express 5 and Fastify 5 apps driven by
// fetch; the limiters run on a ManualClock that stands still, so every count is exact.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { runInNewContext } from 'node:vm';
import express5, { type NextFunction, type Request, type Response } from 'express';
import express4 from 'express4';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fastifyRateLimit, ManualClock, perMinute, RateLimiter } from '../../src/index.js';
import { rateLimit } from '../../src/http/middleware.js';
import { sluice } from '../../src/http/fastify.js';
import { until } from '../helpers/until.js';

const frameworks = [
  ['Express 4', express4 as unknown as typeof express5],
  ['Express 5', express5],
] as const;

const CLIENT = '127.0.0.1';

let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

const limiter = (permits = 2): RateLimiter => new RateLimiter({ limit: perMinute(permits), maxKeys: 16, clock: new ManualClock(0) });


/** A few turns of the event loop: enough for a rejection nobody handles to be reported. */
async function turns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/**
 * `p`, unless a promise rejection goes unhandled first (what ends a Node process by default):
 * then a rejection naming its reason. Unhandled rejections seen meanwhile are also in `seen`.
 */
function orUnhandled<T>(p: Promise<T>, seen: unknown[] = []): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onUnhandled = (reason: unknown): void => {
      seen.push(reason);
      reject(new Error(`unhandled rejection: ${reason instanceof Error ? reason.message : String(reason)}`));
    };
    process.on('unhandledRejection', onUnhandled);
    p.then(
      (v) => { process.off('unhandledRejection', onUnhandled); resolve(v); },
      (e: unknown) => { process.off('unhandledRejection', onUnhandled); reject(e); },
    );
  });
}

async function listen(app: ReturnType<typeof express5>): Promise<string> {
  const server: Server = await new Promise((resolve) => { const s = app.listen(0, CLIENT, () => resolve(s)); });
  closers.push(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));
  return `http://${CLIENT}:${(server.address() as AddressInfo).port}`;
}

async function start(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: CLIENT });
  closers.push(() => { app.server.closeAllConnections(); return app.close(); });
  return `http://${CLIENT}:${(app.server.address() as AddressInfo).port}`;
}

async function get(url: string, init?: RequestInit): Promise<[number, string]> {
  const r = await fetch(url, init);
  return [r.status, await r.text()];
}

/** An error handler that answers 500 with the error's message (unless an answer went out already), and keeps what it saw. */
function errorHandler(seen: unknown[]) {
  return (error: unknown, _req: Request, res: Response, _next: NextFunction): void => {
    seen.push(error);
    if (!res.headersSent) res.status(500).send(`error: ${error instanceof Error ? error.message : String(error)}`);
  };
}

// Both are typed as the options' types name a promise (Promise); at run time neither is an
// instance of this realm's Promise.

/** A promise of `value` made in another realm (node:vm). */
const foreignPromise = <T>(value: T): Promise<T> => runInNewContext('Promise.resolve(value)', { value }) as Promise<T>;

/** A thenable as Bluebird's or a Mongoose Query's: `then` only, settled on a later tick. */
const thenable = <T>(value: T): Promise<T> => ({
  then<A = T, B = never>(resolve?: ((v: T) => A | PromiseLike<A>) | null, reject?: ((e: unknown) => B | PromiseLike<B>) | null): PromiseLike<A | B> {
    void reject;
    return new Promise<A | B>((r) => setImmediate(() => r(resolve ? resolve(value) : (value as unknown as A))));
  },
}) as unknown as Promise<T>;

const thenables = [['a promise of another realm (node:vm)', foreignPromise], ['a Bluebird/Mongoose-style thenable', thenable]] as const;

describe.each(frameworks)('a throw after an async decision goes to the error path, never an unhandled rejection (%s)', (_, express) => {
  it('found: a timeout middleware answered 503 before the async decision: no ERR_HTTP_HEADERS_SENT, no second answer', async () => {
    const l = limiter(1);
    const timeouts: (() => void)[] = [];
    const keys: (() => void)[] = [];
    const reached: boolean[] = [];
    const errors: unknown[] = [];
    const app = express();
    // As connect-timeout: the chain goes on, and the timeout answers 503 when it fires.
    app.use((_req, res, next) => { timeouts.push(() => { res.status(503).send('timed out'); }); next(); });
    app.use(rateLimit({ limiter: l, key: () => new Promise<string>((resolve) => { keys.push(() => resolve(CLIENT)); }) }));
    app.get('/', (_req, res) => {
      reached.push(res.headersSent);
      if (!res.headersSent) res.send('ok');
    });
    app.use(errorHandler(errors));
    const url = await listen(app);

    // Admitted after the 503 went out: the fields are not set (they cannot be), and the chain goes on.
    const first = get(url);
    await until(() => keys.length === 1 && timeouts.length === 1);
    timeouts[0]?.();
    expect(await first).toEqual([503, 'timed out']);
    keys[0]?.();
    await orUnhandled(until(() => reached.length === 1));
    expect(reached).toEqual([true]);
    expect(l.get(CLIENT)?.remaining).toBe(0); // counted

    // Refused after the 503 went out: no 429 on top of it, nothing thrown.
    const second = get(url);
    await until(() => keys.length === 2 && timeouts.length === 2);
    timeouts[1]?.();
    expect(await second).toEqual([503, 'timed out']);
    keys[1]?.();
    await orUnhandled(turns());
    expect(errors).toEqual([]);
    expect(reached).toEqual([true]);
  });

  it('found: a refusal `handler` that throws after an async key: the error reaches the error handler (500)', async () => {
    const errors: unknown[] = [];
    const app = express();
    app.use(rateLimit({ limiter: limiter(1), key: async () => CLIENT, handler: () => { throw new Error('handler failed'); } }));
    app.get('/', (_req, res) => { res.send('ok'); });
    app.use(errorHandler(errors));
    const url = await listen(app);
    expect(await get(url)).toEqual([200, 'ok']);
    expect(await orUnhandled(get(url))).toEqual([500, 'error: handler failed']);
    expect(errors).toHaveLength(1);
  });

  it('found: an async `message` answered after a timeout middleware answered: no second answer, nothing thrown', async () => {
    const l = limiter(1);
    const timeouts: (() => void)[] = [];
    const bodies: (() => void)[] = [];
    const errors: unknown[] = [];
    const app = express();
    app.use((_req, res, next) => { timeouts.push(() => { res.status(503).send('timed out'); }); next(); });
    app.use(rateLimit({ limiter: l, message: () => new Promise<string>((resolve) => { bodies.push(() => resolve('slow down')); }) }));
    app.get('/', (_req, res) => { res.send('ok'); });
    app.use(errorHandler(errors));
    const url = await listen(app);
    expect(await get(url)).toEqual([200, 'ok']);
    const refused = get(url);
    await until(() => bodies.length === 1);
    timeouts[1]?.();
    expect(await refused).toEqual([503, 'timed out']);
    bodies[0]?.();
    await orUnhandled(turns());
    expect(errors).toEqual([]);
  });
});

describe('a throw after an async decision goes to the error path (Fastify 5)', () => {
  it.each([
    ['a sync key', () => CLIENT],
    ['found: an async key', async () => CLIENT],
  ])('the plugin: an answer that throws (request.rateLimit has only a getter) goes to the error handler, with %s', async (_name, key) => {
    const app = Fastify();
    // Another plugin's request.rateLimit, read-only: setting the decision on it throws.
    app.decorateRequest('rateLimit', { getter: () => null });
    await app.register(sluice, { limiter: limiter(), key });
    app.get('/', async () => 'ok');
    const errors: unknown[] = [];
    app.setErrorHandler((error, _request, reply) => {
      errors.push(error);
      return reply.code(500).send(`error: ${error instanceof Error ? error.name : String(error)}`);
    });
    const url = await start(app);
    expect(await orUnhandled(get(url))).toEqual([500, 'error: TypeError']);
    expect(errors).toHaveLength(1);
  });

  it('found: fastify.rateLimit() as a route hook: the same, after an async key', async () => {
    const app = Fastify();
    app.decorateRequest('rateLimit', { getter: () => null });
    await app.register(sluice, { limiter: limiter(), key: async () => CLIENT, global: false });
    app.get('/', { onRequest: app.rateLimit() }, async () => 'ok');
    app.setErrorHandler((error, _request, reply) => reply.code(500).send(`error: ${error instanceof Error ? error.name : String(error)}`));
    const url = await start(app);
    expect(await orUnhandled(get(url))).toEqual([500, 'error: TypeError']);
  });
});

describe.each(frameworks)('thenables are awaited as promises (%s)', (_, express) => {
  it.each(thenables)('found: skip, allowList and denyList resolving false through %s: the limit still holds', async (_name, make) => {
    for (const option of ['skip', 'allowList', 'denyList'] as const) {
      const l = limiter(2);
      const app = express();
      app.use(rateLimit({ limiter: l, [option]: () => make(false) } as Parameters<typeof rateLimit>[0]));
      app.get('/', (_req, res) => { res.send('ok'); });
      const url = await listen(app);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get(url))[0]);
      expect([option, statuses]).toEqual([option, [200, 200, 429]]);
    }
  });

  it.each(thenables)('skip resolving true through %s lets the request through uncounted', async (_name, make) => {
    const l = limiter(1);
    const app = express();
    app.use(rateLimit({ limiter: l, skip: () => make(true) }));
    app.get('/', (_req, res) => { res.send('ok'); });
    const url = await listen(app);
    expect([(await get(url))[0], (await get(url))[0]]).toEqual([200, 200]);
    expect(l.get(CLIENT)).toBeNull(); // never spent from
  });

  it.each(thenables)('found: key, cost and message through %s are awaited', async (_name, make) => {
    const l = limiter(5);
    const app = express();
    app.use(rateLimit({
      limiter: l,
      key: () => make('client-a'),
      cost: () => make(2),
      message: () => make({ error: 'slow down' }),
    }));
    app.get('/', (_req, res) => { res.send('ok'); });
    const url = await listen(app);
    expect((await get(url))[0]).toBe(200);
    expect((await get(url))[0]).toBe(200);
    expect(l.get('client-a')?.remaining).toBe(1);
    expect(await get(url)).toEqual([429, '{"error":"slow down"}']);
  });
});

describe('thenables are awaited as promises (Fastify 5)', () => {
  it.each(thenables)('found: the plugin and the bare hook: skip resolving false through %s: the limit still holds', async (_name, make) => {
    for (const bare of [false, true]) {
      const l = limiter(2);
      const app = Fastify();
      const options = { limiter: l, skip: () => make(false), key: () => make(CLIENT) };
      if (bare) app.addHook('onRequest', fastifyRateLimit(options));
      else await app.register(sluice, options);
      app.get('/', async () => 'ok');
      const url = await start(app);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get(url))[0]);
      expect([bare, statuses]).toEqual([bare, [200, 200, 429]]);
    }
  });
});

describe.each(frameworks)("a throw or rejection with a value Express's next reads as no error still fails the request (%s)", (_, express) => {
  const values = [undefined, null, 0, '', 'route', 'router'];
  it.each(['key', 'skip', 'cost', 'message'] as const)('found: %s throwing or rejecting with undefined, null, 0, "", "route" or "router": 500, the route never runs', async (option) => {
    for (const async of [false, true]) {
      for (const value of values) {
        const l = limiter(1);
        l.tryAcquire(CLIENT); // message runs on a refusal
        const fail = async ? () => Promise.reject(value) : () => { throw value; };
        const errors: unknown[] = [];
        let reached = false;
        const app = express();
        app.use(rateLimit({ limiter: l, [option]: fail } as Parameters<typeof rateLimit>[0]));
        app.get('/', (_req, res) => { reached = true; res.send('ok'); });
        app.use(errorHandler(errors));
        const url = await listen(app);
        const [status, body] = await get(url);
        expect({ option, async, value, status, reached }).toEqual({ option, async, value, status: 500, reached: false });
        expect(body).toMatch(/^error: rateLimit: options\.key, skip, cost, allowList, denyList, message, handler or a hook threw or rejected with .*, which next\(\) would not take for an error$/);
        expect(errors[0]).toBeInstanceOf(Error);
        expect((errors[0] as Error).cause).toBe(value);
      }
    }
  });

  it('an Error, or any other value Express reads as an error, goes to next as it is', async () => {
    const errors: unknown[] = [];
    const app = express();
    const boom = new Error('boom');
    app.use(rateLimit({ limiter: limiter(), key: (req) => { throw req.url === '/a' ? boom : { status: 503 }; } }));
    app.get('/:p', (_req, res) => { res.send('ok'); });
    app.use(errorHandler(errors));
    const url = await listen(app);
    await get(`${url}/a`);
    await get(`${url}/b`);
    expect(errors).toEqual([boom, { status: 503 }]);
  });
});

describe.each(frameworks)('skipFailedRequests: a response that ended or closed before the decision was applied (%s)', (_, express) => {
  it('found: the client went away while an async key was pending: the spend comes back', async () => {
    const l = limiter(2);
    const keys: (() => void)[] = [];
    const closed: Promise<void>[] = [];
    const app = express();
    app.use((_req, res, next) => { closed.push(new Promise((r) => res.once('close', () => r()))); next(); });
    app.use(rateLimit({ limiter: l, skipFailedRequests: true, key: () => new Promise<string>((resolve) => { keys.push(() => resolve(CLIENT)); }) }));
    app.get('/', () => { /* never answers: the client is gone */ });
    const url = await listen(app);
    const abort = new AbortController();
    const request = fetch(url, { signal: abort.signal }).catch(() => 'aborted');
    await until(() => keys.length === 1);
    abort.abort();
    expect(await request).toBe('aborted');
    await closed[0];
    keys[0]?.();
    await until(() => l.get(CLIENT)?.remaining === 2);
  });

  it.each([[500, 2], [200, 1]])('found: an earlier middleware answered %i before the async decision: given back only if it failed', async (status, remaining) => {
    const l = limiter(2);
    const keys: (() => void)[] = [];
    let applied = false;
    const app = express();
    app.use((_req, res, next) => { res.status(status).send('early'); next(); });
    app.use(rateLimit({ limiter: l, skipFailedRequests: true, key: () => new Promise<string>((resolve) => { keys.push(() => resolve(CLIENT)); }) }));
    app.get('/', () => { applied = true; });
    const url = await listen(app);
    expect(await get(url)).toEqual([status, 'early']);
    await until(() => keys.length === 1);
    keys[0]?.();
    await orUnhandled(until(() => applied));
    await turns();
    expect(l.get(CLIENT)?.remaining).toBe(remaining);
  });
});

describe('skipFailedRequests: the client went away while an async key was pending (Fastify 5 plugin)', () => {
  it('found: the spend comes back', async () => {
    const l = limiter(2);
    const keys: (() => void)[] = [];
    const closed: Promise<void>[] = [];
    const app = Fastify();
    app.addHook('onRequest', (_request, reply, done) => { closed.push(new Promise((r) => reply.raw.once('close', () => r()))); done(); });
    await app.register(sluice, { limiter: l, skipFailedRequests: true, key: () => new Promise<string>((resolve) => { keys.push(() => resolve(CLIENT)); }) });
    app.get('/', async () => 'ok');
    const url = await start(app);
    const abort = new AbortController();
    const request = fetch(url, { signal: abort.signal }).catch(() => 'aborted');
    await until(() => keys.length === 1);
    abort.abort();
    expect(await request).toBe('aborted');
    await closed[0];
    keys[0]?.();
    await until(() => l.get(CLIENT)?.remaining === 2);
  });
});

describe.each(frameworks)('skipFailedRequests and a hook that throws after the admission (%s)', (_, express) => {
  it.each([
    ['onExceeding, a sync key', 'onExceeding', (): string => CLIENT, 0],
    ['onExceeding, an async key', 'onExceeding', async (): Promise<string> => CLIENT, 0],
    ['onLimit (the admission that leaves nothing), a sync key', 'onLimit', (): string => CLIENT, 1],
    ['onLimit, an async key', 'onLimit', async (): Promise<string> => CLIENT, 1],
  ] as const)('found: %s: the error goes to the error handler (500) and the failed spend comes back, once', async (_name, hook, key, spent) => {
    const l = limiter(2);
    for (let i = 0; i < spent; i++) l.tryAcquire(CLIENT);
    const errors: unknown[] = [];
    const app = express();
    app.use(rateLimit({ limiter: l, key, skipFailedRequests: true, [hook]: () => { throw new Error('hook failed'); } }));
    app.get('/', (_req, res) => { res.send('ok'); });
    app.use(errorHandler(errors));
    const url = await listen(app);
    for (let i = 0; i < 3; i++) {
      expect(await get(url)).toEqual([500, 'error: hook failed']);
      await until(() => l.get(CLIENT)?.remaining === 2 - spent);
    }
    // Both the response's events have come: twice would have given back more than was spent.
    await turns();
    expect(l.get(CLIENT)?.remaining).toBe(2 - spent);
    expect(errors).toHaveLength(3);
  });

  it('skipSuccessfulRequests only: the failed (500) request keeps its spend', async () => {
    const l = limiter(2);
    const app = express();
    app.use(rateLimit({ limiter: l, skipSuccessfulRequests: true, onExceeding: () => { throw new Error('hook failed'); } }));
    app.get('/', (_req, res) => { res.send('ok'); });
    app.use(errorHandler([]));
    const url = await listen(app);
    expect(await get(url)).toEqual([500, 'error: hook failed']);
    await turns();
    expect(l.get(CLIENT)?.remaining).toBe(1);
  });
});

describe('skipFailedRequests and a hook that throws after the admission (Fastify 5)', () => {
  it.each([false, true])('found: the plugin (bare hook: %s): the error goes to the error path and the failed spend comes back', async (bare) => {
    const l = limiter(1);
    const app = Fastify();
    const options = { limiter: l, skipFailedRequests: true, key: async () => CLIENT, onExceeding: () => { throw new Error('hook failed'); } };
    if (bare) app.addHook('onRequest', fastifyRateLimit(options));
    else await app.register(sluice, options);
    app.get('/', async () => 'ok');
    const url = await start(app);
    for (let i = 0; i < 3; i++) {
      expect((await get(url))[0]).toBe(500);
      await until(() => l.get(CLIENT)?.remaining === 1);
    }
  });
});
