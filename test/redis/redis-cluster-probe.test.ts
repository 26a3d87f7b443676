// A key's half-open breaker on a Cluster whose global cap lives on another primary. Found: the
// key's probe was let through after the cap's call returned, but its call kept the deadline set
// before the cap's call; its failure was then dated before the probe began, the breaker ignored
// it as an older call's, and stayed half open for ever: with onError 'allow' a 5-per-hour key
// admitted 77 of 77 degraded after its primary recovered, never asking Redis again.
//
// A fake two-primary Cluster over one standalone server: client.ts takes any object with
// `isCluster` and `slots` for an ioredis Cluster, so the limiter runs its real Cluster path (the
// cap's own plan, a breaker per primary). Primary A holds the cap's slot and answers 3 ms late;
// primary B holds every other slot and fails while the test says so.
import { describe, expect, it } from 'vitest';
import { perHour, RedisRateLimiter } from '../../src/index.js';
import { Breaker } from '../../src/redis/breaker.js';
import { keySlot } from '../../src/redis/key-slot.js';
import { globalKey } from '../../src/redis/redis-keys.js';
import { privateRedis, redisAvailable } from '../helpers/redis-server.js';

const available = redisAvailable();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!available)("a key's breaker on a Cluster with the cap on another primary", () => {
  const redisServer = privateRedis();

  it('a failed half-open probe after the cap\'s call counts as the probe\'s: the key reaches Redis again once its primary is back', async () => {
    const prefix = 'probe1:';
    const capSlot = keySlot(globalKey(prefix, '0/1'));
    const slots = Array.from({ length: 16_384 }, (_, s) => [s === capSlot ? '10.0.0.1:7000' : '10.0.0.2:7000']);
    let failingB = false;
    let callsToB = 0;
    const io = redisServer.io;
    const cluster = {
      isCluster: true,
      slots,
      options: {},
      async call(command: string, ...args: (string | number)[]) {
        if (command === 'EVALSHA' || command === 'EVAL') {
          const onA = keySlot(String(args[2])) === capSlot;
          if (onA) await sleep(3);
          else {
            callsToB++;
            if (failingB) throw new Error('ERR injected: primary B is away');
          }
        }
        return io.call(command, ...args);
      },
    };
    const limiter = new RedisRateLimiter({
      prefixCheck: 'off', redis: cluster, prefix, limit: perHour(5), globalLimit: perHour(100_000), localTier: false, onError: 'allow', timeoutMs: 1_000,
    });
    expect(keySlot(globalKey(prefix, '0/1'))).toBe(capSlot);
    // Both primaries answer.
    expect((await limiter.tryAcquire('k')).degraded).toBeUndefined();
    // B fails: three failures in a row open its breaker.
    failingB = true;
    for (let i = 0; i < 3; i++) expect((await limiter.tryAcquire('k', 0)).degraded).toBe(true);
    expect(limiter.breakerOpen).toBe(true);
    // Past the first cooldown the key's probe goes, after the cap's call (3 ms), and fails.
    await sleep(150);
    const before = callsToB;
    expect((await limiter.tryAcquire('k', 0)).degraded).toBe(true);
    expect(callsToB - before, 'the half-open probe went to B').toBe(1);
    // B is back: within a few cooldowns a probe goes, succeeds, and Redis decides the key again.
    failingB = false;
    const sentAfter = callsToB;
    let decided = false;
    const until = performance.now() + 3_000;
    while (!decided && performance.now() < until) {
      decided = (await limiter.tryAcquire('k', 0)).degraded === undefined;
      if (!decided) await sleep(20);
    }
    expect(callsToB - sentAfter, 'calls that reached B after it recovered').toBeGreaterThan(0);
    expect(decided, 'Redis decided the key again').toBe(true);
    expect(limiter.breakerOpen).toBe(false);
    // And the limit holds again: 5 an hour, 1 spent.
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await limiter.tryAcquire('k'));
    expect(answers.map((d) => d.allowed)).toEqual([true, true, true, true, false, false]);
  });
});

describe('a probe that never settles', () => {
  it('times out: past the probe timeout the breaker lets another probe through', () => {
    const b = new Breaker(3, 100, 5_000, 1_000);
    for (let i = 0; i < 3; i++) b.failed(10, b.token());
    expect(b.pass(110)).toBe(true); // the probe; its call never settles (nothing calls failed/succeeded)
    b.token();
    expect(b.pass(500)).toBe(false);
    // Counted failed at 110 + 1,000: open again for the next cooldown (200 ms), then a new probe.
    expect(b.pass(1_200)).toBe(false);
    expect(b.pass(1_310)).toBe(true);
  });
});
