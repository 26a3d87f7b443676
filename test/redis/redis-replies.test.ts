// What the Redis limiters do with what comes back from Redis: a reply that is not the script's is
// a failure of the call (never an admission), and the breaker that failures open closes at the
// first success, letting one probe through while half open. The client is a real ioredis client
// on a private redis-server, wrapped where a test needs a reply rewritten or a call failed.
import { describe, expect, it } from 'vitest';
import { perHour, RedisRateLimiter } from '../../src/index.js';
import { Breaker } from '../../src/redis/breaker.js';
import { privateRedis, redisAvailable } from '../helpers/redis-server.js';

const available = redisAvailable();

/** A client that sends every command to `io`, but answers script calls with `rewrite(reply)`. */
function rewriting(io: { call(command: string, ...args: (string | number)[]): Promise<unknown> }, rewrite: (reply: unknown) => unknown) {
  return {
    async call(command: string, ...args: (string | number)[]) {
      const reply = await io.call(command, ...args);
      return command === 'EVALSHA' || command === 'EVAL' ? rewrite(reply) : reply;
    },
  };
}

describe('the breaker, on its own (times given)', () => {
  it('opens after 3 failures in a row, then lets one probe through, whose success closes it', () => {
    const b = new Breaker(3, 100, 5_000);
    b.failed(0, 0);
    b.failed(1, 0);
    expect(b.pass(2)).toBe(true);
    b.failed(2, 2); // third in a row: open until 102
    expect(b.pass(50)).toBe(false);
    expect(b.admits(101)).toBe(false);
    expect(b.pass(102)).toBe(true); // the probe
    expect(b.pass(103)).toBe(false); // half open: the others answer at once
    expect(b.admits(103)).toBe(false);
    b.succeeded();
    expect(b.pass(104)).toBe(true);
    expect(b.pass(104)).toBe(true);
  });

  it('closes at once when a call made before it opened is answered late', () => {
    const b = new Breaker(3, 100, 5_000);
    for (let i = 0; i < 3; i++) b.failed(10, 0);
    expect(b.pass(20)).toBe(false);
    b.succeeded(); // Redis answered a call sent at 0
    expect(b.pass(21)).toBe(true);
  });

  it('a failed probe opens it for twice as long; the late failure of an older call does not', () => {
    const b = new Breaker(3, 100, 5_000);
    for (let i = 0; i < 3; i++) b.failed(10, 0); // open until 110, next cooldown 200
    expect(b.pass(110)).toBe(true); // the probe, asked at 110
    b.failed(115, 5); // a call asked at 5 times out now: not the probe
    expect(b.pass(116)).toBe(false); // still half open, the probe in flight
    b.failed(120, 110); // the probe fails: open until 320
    expect(b.pass(319)).toBe(false);
    expect(b.pass(320)).toBe(true);
    b.failed(330, 320); // open until 730 (cooldown 400)
    expect(b.pass(729)).toBe(false);
    expect(b.pass(730)).toBe(true);
  });
});

describe.skipIf(!available)('replies that are not the script\'s', () => {
  const redisServer = privateRedis();
  let n = 0;

  // Found: a client whose script reply was 'OK' made tryAcquire answer allowed: true,
  // remaining: NaN, 3 of 3 times at a limit of 1; [1, 2, 'x'] was admitted too.
  it.each([
    ['a status reply', (): unknown => 'OK'],
    ['an array with a string that is no number', (): unknown => [1, 2, 'x']],
    ['null', (): unknown => null],
    ['an empty array', (): unknown => []],
    ['an unknown status', (r: unknown): unknown => (Array.isArray(r) && r.length > 2 ? [9, ...r.slice(1)] : [9, 0, 0, 0, 0, 1, 0])],
    ['a number too many', (r: unknown): unknown => (Array.isArray(r) ? [7, ...r] : r)],
  ])('%s is a failure: answered by onError, degraded, never admitted', async (_, rewrite) => {
    const limiter = new RedisRateLimiter({
      redis: rewriting(redisServer.io, rewrite), limit: perHour(1), prefix: `m${n++}:`, localTier: false, onError: 'deny',
    });
    for (let i = 0; i < 3; i++) {
      const d = await limiter.tryAcquire('k');
      expect(d).toMatchObject({ allowed: false, reason: 'unavailable', degraded: true });
    }
    // A batch too: several decisions in one script call.
    const many = await Promise.all(Array.from({ length: 5 }, (_, i) => limiter.tryAcquire(`b${i}`)));
    for (const d of many) expect(d).toMatchObject({ allowed: false, degraded: true });
  });

  it('the same replies, unrewritten, decide as the limit says (the wrapper changes nothing else)', async () => {
    const limiter = new RedisRateLimiter({ redis: rewriting(redisServer.io, (r) => r), limit: perHour(1), prefix: `m${n++}:`, localTier: false, onError: 'deny' });
    expect(await limiter.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.tryAcquire('k')).toMatchObject({ allowed: false, reason: 'limited' });
    const many = await Promise.all(Array.from({ length: 5 }, (_, i) => limiter.tryAcquire(`b${i}`)));
    for (const d of many) expect(d).toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe.skipIf(!available)('the breaker of a Redis limiter', () => {
  const redisServer = privateRedis();
  let n = 0;

  it('half open, one call goes to Redis and the rest answer at once; its success closes the breaker', async () => {
    let failing = true;
    let scriptCalls = 0;
    const io = redisServer.io;
    const client = {
      async call(command: string, ...args: (string | number)[]) {
        if (command === 'EVALSHA' || command === 'EVAL') {
          // One per script call: an EVAL follows an EVALSHA only when Redis lacks the script.
          if (command === 'EVALSHA') scriptCalls++;
          if (failing) throw new Error('ERR injected: the server is away');
        }
        return io.call(command, ...args);
      },
    };
    const limiter = new RedisRateLimiter({ redis: client, limit: perHour(100), prefix: `b${n++}:`, localTier: false, onError: 'deny' });
    // Three failures in a row (one call each, one after the other) open it.
    for (let i = 0; i < 3; i++) expect(await limiter.tryAcquire(`k${i}`)).toMatchObject({ degraded: true });
    expect(limiter.breakerOpen).toBe(true);
    const sent = scriptCalls;
    // Open: answered at once, nothing sent.
    expect(await limiter.tryAcquire('k')).toMatchObject({ allowed: false, degraded: true });
    expect(scriptCalls).toBe(sent);
    // Past the first cooldown (100 ms), Redis is back: one probe goes, the other calls made while
    // it is in flight answer at once.
    failing = false;
    const until = performance.now() + 5_000;
    while (limiter.breakerOpen && performance.now() < until) await new Promise((r) => setTimeout(r, 10));
    const calls = Array.from({ length: 10 }, (_, i) => limiter.tryAcquire(`h${i}`));
    const answers = await Promise.all(calls);
    expect(scriptCalls - sent, 'script calls while half open').toBe(1);
    expect(answers[0]).toMatchObject({ allowed: true });
    expect(answers[0]?.degraded).toBeUndefined();
    for (const d of answers.slice(1)) expect(d).toMatchObject({ allowed: false, degraded: true });
    // Closed: every call goes to Redis again.
    expect(limiter.breakerOpen).toBe(false);
    const after = await Promise.all(Array.from({ length: 5 }, (_, i) => limiter.tryAcquire(`a${i}`)));
    for (const d of after) expect(d.degraded).toBeUndefined();
  });
});
