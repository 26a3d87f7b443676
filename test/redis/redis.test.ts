// RedisRateLimiter against a real redis-server (started by the test, on its own socket), through
// both clients: the same decisions as the shared-memory limiter, exact under processes racing,
// and never a hang or a late spend when the server freezes or dies.
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { Redis } from 'ioredis';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { perDay, perHour, perMinute, perSecond, RateLimiter, RateLimitTimeoutError, RedisRateLimiter, type RedisRateLimiterOptions } from '../../src/index.js';
import { limitsScript } from '../../src/redis/limits-script.js';
import { redisLimit } from '../../src/redis/redis-limits.js';
import { byRedis, firstAnswer, redisAvailable, startRedis, testClients, type TestRedis } from '../helpers/redis-server.js';

const available = redisAvailable();
const YEAR_MS = 365 * 24 * 3_600_000;

const clients = testClients;

describe.skipIf(!available).each(clients)('RedisRateLimiter over $name', (client) => {
  let server: TestRedis;
  let redis: unknown;
  let n = 0;
  /**
   * A limiter with its own prefix, so tests never share keys, and no local tier: these tests
   * read Redis's own answers (test/redis-tier.test.ts tests the tier's). A deadline no busy
   * machine misses: a limiter's first call also reads Redis's clock and loads the script, and at
   * the default 500 ms it was answered by onError (found: node-redis's first call, the answers
   * test's a.allowed false, beside two CPU-bound loops). The deadlines are tested below.
   */
  const limiter = (options: Omit<RedisRateLimiterOptions, 'redis'>): RedisRateLimiter =>
    new RedisRateLimiter({ redis, prefix: `t${n++}:`, localTier: false, timeoutMs: 5_000, ...options });

  beforeAll(async () => {
    server = await startRedis();
    redis = await client.make(server.socket);
  });
  afterAll(async () => {
    await client.close(redis);
    await server.stop();
  });

  it('answers as the shared-memory limiter does: burst, then refusals with the wait', async () => {
    const r = limiter({ limit: perHour(5) });
    const m = new RateLimiter({ limit: perHour(5), maxKeys: 4 });
    let firstSpan = 0;
    for (let i = 0; i < 7; i++) {
      const t0 = performance.now();
      const [a, b] = [await r.tryAcquire('k'), m.tryAcquire('k')];
      // Redis decided, and then the shared-memory limiter, within this span.
      const span = performance.now() - t0;
      if (i === 0) firstSpan = span;
      expect(a.allowed).toBe(b.allowed);
      expect(a.reason).toBe(b.reason);
      expect(a.remaining).toBe(b.remaining);
      // Each limiter's waits count from its own first admission: they differ by how far apart
      // the two decided then and now (each within its call's span), and by Redis's whole µs. A
      // fixed 50 ms was passed by one round trip on a busy machine (56.6 ms).
      const slack = firstSpan + span + 1;
      expect(Math.abs(a.retryAfterMs - b.retryAfterMs)).toBeLessThanOrEqual(slack);
      expect(Math.abs(a.resetAfterMs - b.resetAfterMs)).toBeLessThanOrEqual(slack);
    }
  });

  it('spends several limits together or not at all, and reports a cost over the burst', async () => {
    const r = limiter({ limit: [perSecond(10), perHour(3)] });
    expect(await r.tryAcquire('k', 2)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await r.tryAcquire('k', 2)).toMatchObject({ allowed: false, reason: 'limited', remaining: 1 });
    expect(await r.tryAcquire('k', 1)).toMatchObject({ allowed: true, remaining: 0 });
    expect(await r.tryAcquire('k', 11)).toMatchObject({ allowed: false, reason: 'exceeds-burst', retryAfterMs: Infinity });
    expect(await r.tryAcquire('k', 0)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('a global cap is shared by every key and refuses without spending the key', async () => {
    const r = limiter({ limit: perHour(10), globalLimit: perHour(3), prefix: 'cap:' });
    const got = [];
    for (const k of ['a', 'b', 'c', 'd']) got.push((await r.tryAcquire(k)).reason);
    expect(got).toEqual(['allowed', 'allowed', 'allowed', 'global-limit']);
    expect((await r.tryAcquire('d', 0)).remaining).toBe(0); // the cap's remaining
    const io = new Redis({ path: server.socket });
    expect(await io.exists('cap:{a}:0/1')).toBe(1);
    expect(await io.exists('cap:{d}:0/1')).toBe(0); // d's own quota was not spent
    io.disconnect();
  });

  it('writes nothing for a refusal or a probe, and lets a key expire when its debt is paid', async () => {
    // One a second: the steps below run well inside the first admission's second of debt, however
    // slow the round trips (at 10 a second, a busy machine's six round trips could outlast its
    // 100 ms: the key expired before the PTTL, or the third allow was admitted).
    const r = limiter({ limit: perSecond(1, { burst: 2 }), prefix: 'exp:' });
    const io = new Redis({ path: server.socket });
    expect(await r.allow('k')).toBe(true);
    const pttl = await io.pttl('exp:{k}:0/1');
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(1_000); // 1 s of debt
    expect(await r.allow('k')).toBe(true);
    const full = await io.get('exp:{k}:0/1');
    expect(await r.allow('k')).toBe(false);
    expect(await r.tryAcquire('k', 0)).toMatchObject({ allowed: true, remaining: 0 });
    expect(await io.get('exp:{k}:0/1')).toBe(full); // neither the refusal nor the probe wrote
    // Paid off after 2 s of debt: gone, as a fresh key (looked at until then, 10 s at most).
    for (const end = performance.now() + 10_000; (await io.exists('exp:{k}:0/1')) === 1 && performance.now() < end;) {
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(await io.exists('exp:{k}:0/1')).toBe(0);
    await r.tryAcquire('k', 0);
    expect(await io.exists('exp:{k}:0/1')).toBe(0);
    io.disconnect();
  });

  it('keeps user keys apart: braces escaped, long keys hashed', async () => {
    const r = limiter({ limit: perHour(1) });
    const keys = ['a}b', 'a%7Db', '{a}', 'x'.repeat(300), 'x'.repeat(301)];
    for (const k of keys) expect(await r.allow(k)).toBe(true);
    for (const k of keys) expect(await r.allow(k)).toBe(false);
  });

  it('refuses bad input at once, naming it, and spends nothing', async () => {
    const r = limiter({ limit: perHour(1) });
    expect(() => r.tryAcquire('', 1)).toThrow(TypeError);
    expect(() => r.tryAcquire('k', -1)).toThrow(/cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got -1/);
    expect(() => new RedisRateLimiter({ redis, limit: perHour(1), timeout: 5 } as never)).toThrow(/options\.timeout is not a RedisRateLimiter option/);
    expect(() => new RedisRateLimiter({ redis: {}, limit: perHour(1) })).toThrow(/options\.redis must be an ioredis or node-redis client/);
    expect(() => new RedisRateLimiter({ redis, limit: perHour(1), algorithm: 'leaky' as never })).toThrow(/options\.algorithm must be one of/);
    expect(() => new RedisRateLimiter({ redis, limit: perHour(1.5), algorithm: 'fixed-window' })).toThrow(/options\.limit\.permits/);
    expect(() => new RedisRateLimiter({ redis, limit: perHour(2000), algorithm: 'sliding-log' })).toThrow(/options\.limit\.permits/);
    expect(() => new RedisRateLimiter({ redis, limit: { permits: 1, periodMs: 0.0001 } })).toThrow(/whole number of microseconds/);
    expect(await r.allow('k')).toBe(true);
  });

  it('decisions in flight together share script calls and are each exact', async () => {
    const r = limiter({ limit: perDay(100) });
    const all = await Promise.all(Array.from({ length: 250 }, () => r.allow('hot')));
    expect(all.filter(Boolean).length).toBe(100);
  });
});

describe.skipIf(!available)('RedisRateLimiter under faults (ioredis)', () => {
  let server: TestRedis;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('a frozen server: every call answers by its deadline, and the late calls spend nothing', async () => {
    const io = new Redis({ path: server.socket, maxRetriesPerRequest: null });
    const deny = new RedisRateLimiter({ redis: io, limit: perDay(1000), prefix: 'frozen:', timeoutMs: 100 });
    const allow = new RedisRateLimiter({ redis: io, limit: perDay(1000), prefix: 'frozen:', timeoutMs: 100, onError: 'allow' });
    // Each limiter's first call answered (firstAnswer), then the spend. On a busy machine its
    // answer may come after the deadline, spent or not: the check below compares with the key's
    // state read before the freeze.
    await firstAnswer(() => deny.tryAcquire('k', 0), byRedis);
    await firstAnswer(() => allow.tryAcquire('k', 0), byRedis);
    await deny.allow('k', 10);
    const before = (await firstAnswer(() => deny.tryAcquire('k', 0), byRedis)).remaining;
    expect([990, 1000]).toContain(before);
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    server.process.kill('SIGSTOP');
    try {
      const t0 = performance.now();
      const answers = await Promise.all([
        ...Array.from({ length: 20 }, () => deny.tryAcquire('k', 10)),
        ...Array.from({ length: 20 }, () => allow.tryAcquire('k', 10)),
      ]);
      const took = performance.now() - t0;
      lag.disable();
      // 100 ms deadlines; no call hangs. Their timers fire late by the event loop's lag, and the
      // answers can wait out a second stall (as redis-faults.test.ts allows): a call that waited
      // for the server would take until the SIGCONT below.
      expect(took).toBeLessThan(100 + Math.max(300, (2 * lag.max) / 1e6 + 50));
      expect(answers.every((d) => d.reason === 'unavailable')).toBe(true);
      expect(answers.filter((d) => d.allowed).length).toBe(20); // onError: 'allow' answered yes
    } finally {
      server.process.kill('SIGCONT');
    }
    // The 40 calls reach Redis now, past their deadlines: none spends.
    await new Promise((r) => setTimeout(r, 200));
    expect((await firstAnswer(() => deny.tryAcquire('k', 0), byRedis)).remaining).toBe(before);
    io.disconnect();
  });

  it('a killed server: calls answer by their deadline; restarted, decisions resume (the script is loaded anew)', async () => {
    const io = new Redis({ path: server.socket, maxRetriesPerRequest: null, retryStrategy: () => 20 });
    io.on('error', () => {});
    const r = new RedisRateLimiter({ redis: io, limit: perDay(5), prefix: 'killed:', timeoutMs: 100 });
    await firstAnswer(() => r.tryAcquire('k', 0), byRedis); // connected, the script loaded
    await server.kill();
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const t0 = performance.now();
    const during = await Promise.all(Array.from({ length: 10 }, () => r.tryAcquire('k')));
    const took = performance.now() - t0;
    lag.disable();
    expect(took).toBeLessThan(100 + Math.max(300, (2 * lag.max) / 1e6 + 50)); // 100 ms deadlines: none hangs
    expect(during.every((d) => d.reason === 'unavailable' && !d.allowed)).toBe(true);
    await server.relaunch();
    await new Promise((res) => setTimeout(res, 150)); // the client reconnects
    // The fresh server had no script: the calls the client queued while it was down reached it
    // (EVALSHA failed, EVAL loaded it), past their deadlines: none spent. No state survived (no
    // persistence): the next call is a fresh key's first. Asked with a deadline no busy machine
    // misses (r's 100 ms one, and r's breaker, opened by the calls above, are not what is tested).
    const after = new RedisRateLimiter({ redis: io, limit: perDay(5), prefix: 'killed:', timeoutMs: 5_000 });
    expect(await after.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 4 });
    expect(await io.script('EXISTS', limitsScript([redisLimit('gcra', perDay(5), 'limit', 1)], []).sha)).toEqual([1]);
    io.disconnect();
  });
});

describe.skipIf(!available)('RedisRateLimiter: breaker, local fallback, acquire (ioredis)', () => {
  let server: TestRedis;
  let io: Redis;
  beforeAll(async () => {
    server = await startRedis();
    io = new Redis({ path: server.socket, maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    io.disconnect();
    await server.stop();
  });

  it('opens after 3 calls Redis did not answer, answers at once while open, closes on a success', async () => {
    const r = new RedisRateLimiter({ redis: io, limit: perDay(1000), prefix: 'breaker:', timeoutMs: 50 });
    expect(await firstAnswer(() => r.tryAcquire('k'), byRedis)).toMatchObject({ allowed: true }); // closes the breaker
    server.process.kill('SIGSTOP');
    try {
      const first = await Promise.all([r.tryAcquire('k'), r.tryAcquire('k'), r.tryAcquire('k')]);
      expect(first.every((d) => d.degraded === true && d.reason === 'unavailable')).toBe(true);
      expect(r.breakerOpen).toBe(true);
      // No 50 ms wait: Redis is not asked. Told by the event loop's order, not by a clock (a busy
      // machine can stall 20 ms anywhere): an answer without Redis comes at once or from this
      // loop turn's check phase, before any timer; one that waited for Redis would come at its
      // 50 ms deadline, after this 25 ms timer.
      const call = r.tryAcquire('k');
      const winner = await Promise.race([call.then(() => 'answer'), new Promise((res) => setTimeout(() => res('timer'), 25))]);
      expect(winner).toBe('answer');
      expect(await call).toMatchObject({ allowed: false, reason: 'unavailable', degraded: true });
    } finally {
      server.process.kill('SIGCONT');
    }
    await new Promise((res) => setTimeout(res, 150)); // past the first cooldown (100 ms)
    expect(r.breakerOpen).toBe(false);
    // Decided by Redis again (firstAnswer: a busy machine may miss the 50 ms deadline of one call,
    // which opens the breaker again; the next try comes past its cooldown).
    const back = await firstAnswer(() => r.tryAcquire('k'), byRedis);
    expect(back.reason).toBe('allowed');
  });

  it('a frozen server keeps the breaker open: calls queued behind the stuck ones count against it', async () => {
    // Four calls in flight hold the frozen server; the decisions after them wait unsent and time
    // out. Counted as failures, they reopen the breaker after each cooldown (100, 200, 400 ms), so
    // it stays open for most of the outage; not counted, it closed after 100 ms and every call
    // waited out its deadline.
    const r = new RedisRateLimiter({ redis: io, limit: perDay(1_000_000), prefix: 'stuck:', timeoutMs: 50, localTier: false, maxBatch: 1 });
    // One answer from the server before it freezes (firstAnswer: a round trip on a busy machine
    // can take longer than the 50 ms deadline).
    const first = await firstAnswer(() => r.tryAcquire('k'), byRedis);
    expect(first).toMatchObject({ allowed: true });
    expect(first.degraded).toBeUndefined();
    server.process.kill('SIGSTOP');
    let open = 0;
    let seen = 0;
    try {
      const until = performance.now() + 700;
      while (performance.now() < until) {
        void r.tryAcquire('k');
        seen++;
        if (r.breakerOpen) open++;
        await new Promise((res) => setTimeout(res, 5));
      }
    } finally {
      server.process.kill('SIGCONT');
    }
    expect(open / seen).toBeGreaterThan(0.5);
    await new Promise((res) => setTimeout(res, 1_000)); // past the longest cooldown so far
    // Answered again once the server is back (a busy machine may miss the 50 ms deadline of one
    // call: then the next, past the cooldown).
    let after = await r.tryAcquire('k');
    for (let i = 0; i < 40 && after.degraded === true; i++) {
      await new Promise((res) => setTimeout(res, 150));
      after = await r.tryAcquire('k');
    }
    expect(after.degraded).toBeUndefined();
  });

  it('one late reply does not make the deadlines after it early', async () => {
    // The reply to a call comes after a 1.5 s stall of this thread: read then, it puts Redis's
    // clock 1.5 s behind. Taken as the offset, the next deadline would reach Redis 0.5 s in the
    // past, and a healthy server would answer it LATE. (A deadline of 1 s, not 150 ms: a busy
    // machine's round trip must not look like that LATE.)
    const r = new RedisRateLimiter({ redis: io, limit: perDay(1_000), prefix: 'lateReply:', timeoutMs: 1_000, localTier: false });
    await firstAnswer(() => r.tryAcquire('k', 0), byRedis); // learns the offset
    const p = r.tryAcquire('k');
    for (let i = 0; i < 10; i++) await null; // the call is on its way
    const stallUntil = performance.now() + 1_500;
    while (performance.now() < stallUntil) { /* this thread is busy */ }
    await p;
    await new Promise((res) => setTimeout(res, 50));
    const d = await r.tryAcquire('k');
    expect(d.degraded).toBeUndefined();
    expect(d.allowed).toBe(true);
  });

  it("onError 'local': the shared-memory limiter enforces the same limits while Redis is away", async () => {
    const local = new RateLimiter({ limit: perDay(3), maxKeys: 16 });
    const r = new RedisRateLimiter({ redis: io, limit: perDay(3), prefix: 'local:', timeoutMs: 50, onError: 'local', local });
    server.process.kill('SIGSTOP');
    let answers;
    try {
      answers = await Promise.all(Array.from({ length: 5 }, () => r.tryAcquire('k')));
    } finally {
      server.process.kill('SIGCONT');
    }
    expect(answers.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(answers.every((d) => d.degraded === true)).toBe(true);
    expect(answers[4]?.reason).toBe('limited');
    expect(() => new RedisRateLimiter({ redis: io, limit: perDay(3), local })).toThrow(/options\.local is used only with onError: 'local'/);
  });

  it('acquire() waits for the reported time, refuses a wait over maxWaitMs, and a cost that never passes', async () => {
    const r = new RedisRateLimiter({ redis: io, limit: perSecond(20, { burst: 1 }), prefix: 'acquire:', timeoutMs: 5_000 });
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) await r.acquire('k');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(95); // 50 ms apart after the first
    // A wait over maxWaitMs, on a limit whose turn no busy machine reaches between two calls (on
    // the one above, 40 ms of lag after its last admission leave a wait under 10 ms).
    const slow = new RedisRateLimiter({ redis: io, limit: perMinute(1, { burst: 1 }), prefix: 'acquire-slow:', timeoutMs: 5_000 });
    await slow.acquire('k');
    await expect(slow.acquire('k', { maxWaitMs: 10 })).rejects.toThrow(RateLimitTimeoutError);
    await expect(r.acquire('k', { cost: 2 })).rejects.toThrow(/can never pass/);
  });
});

describe.skipIf(!available)('RedisRateLimiter from racing processes', () => {
  let server: TestRedis;
  // Four racing processes, started once: each case sends them a job and waits for their counts.
  let children: ChildProcess[] = [];
  beforeAll(async () => {
    server = await startRedis();
    children = Array.from({ length: 4 }, () => fork(new URL('../fixtures/redis-hammer.mjs', import.meta.url), [], {
      env: { ...process.env, SOCKET: server.socket },
    }));
  });
  afterAll(async () => {
    await Promise.all(children.map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null || c.signalCode !== null) return resolve();
      c.once('exit', () => resolve());
      if (c.connected) c.send('stop');
      else c.kill();
    })));
    await server.stop();
  });

  it('examples/cluster-redis.js: 4 processes x 2 threads share one limit of 100', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['examples/cluster-redis.js'], {
        // 90 s: four processes of two threads each start on a busy machine (15 s beside two
        // CPU-bound loops and other tests, against 6 s in a plain busy run).
        cwd: new URL('../../', import.meta.url), env: { ...process.env, REDIS_SOCKET: server.socket }, timeout: 90_000,
      }, (e, stdout) => (e ? reject(e) : resolve(stdout)));
    });
    expect(out).toBe('admitted 100 of 400 (limit 100 per hour)\n');
  }, 120_000);

  it.each([
    ['one limit', { limit: perDay(1000) }, 1000],
    ['two limits', { limit: [perHour(2000), perDay(700)] }, 700],
    ['a global cap', { limit: perDay(5000), globalLimit: perDay(600) }, 600],
    // Windows of 50 years: the race never straddles a window's edge.
    ['fixed window', { algorithm: 'fixed-window', limit: { permits: 500, periodMs: 50 * YEAR_MS } }, 500],
    ['sliding window', { algorithm: 'sliding-window', limit: { permits: 400, periodMs: 50 * YEAR_MS } }, 400],
    ['sliding log', { algorithm: 'sliding-log', limit: perHour(300) }, 300],
    ['rules', { rules: [{ limit: perDay(10) }, { user: 'u1', limit: perDay(20) }, { user: 'u1', api: 'search', algorithm: 'sliding-log', limit: perHour(250) }] }, 250],
    ['fixed windows, two limits and a cap', { algorithm: 'fixed-window', limit: [{ permits: 900, periodMs: 50 * YEAR_MS }, { permits: 450, periodMs: 40 * YEAR_MS }], globalLimit: { permits: 350, periodMs: 50 * YEAR_MS } }, 350],
  ])('4 processes x 64 calls in flight on one key admit exactly the limit: %s', async (_name, options, expected) => {
    // Each process makes as many calls as the limit: four times the limit in all, 256 in flight
    // while the count crosses it.
    const job = { prefix: `race${expected}${_name.length}:`, options, calls: expected, inFlight: 64 };
    const results = await Promise.all(children.map((c) => new Promise<{ admitted: number; unavailable: number }>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`child exited ${code}`));
      c.once('exit', onExit);
      c.once('error', reject);
      c.once('message', (m) => {
        c.off('exit', onExit);
        c.off('error', reject);
        const r = m as { admitted: number; unavailable: number; error?: string };
        if (r.error !== undefined) reject(new Error(r.error));
        else resolve(r);
      });
      c.send(job);
    })));
    expect(results.reduce((a, r) => a + r.unavailable, 0)).toBe(0);
    expect(results.reduce((a, r) => a + r.admitted, 0)).toBe(expected);
  });
});
