// The deadline's promise: "the deadline on Redis's clock is never later than the moment
// the limiter answers" while the two clocks drift apart by less than the 100 ppm ScriptBatcher
// allows for (script-batcher.ts #learn: the bound "is relaxed by 100 ppm of the time since it was
// last raised"). Redis here is a stand-in whose clock we own (the point is Redis's clock itself),
// and performance.now() is stubbed: every number below is exact and the run deterministic.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { perHour, RedisRateLimiter } from '../../src/index.js';

describe('the clock offset behind every deadline', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('a deadline sent after a long run of slow replies is never later than the moment the limiter gives up', async () => {
    let local = 0; // performance.now(), ms
    vi.spyOn(performance, 'now').mockImplementation(() => local);
    /** Redis's clock at local time `l`: 99 ppm slower than ours (within the 100 ppm allowed). */
    const DRIFT = 0.99e-4;
    const C = 1_000_000; // ms
    const redisMs = (l: number) => C + l * (1 - DRIFT);
    let rtt = 0;
    const sent: { deadlineUs: number; sentAt: number }[] = [];
    const fake = {
      // An ioredis-like client: Redis reads its clock when the command arrives (at once), and the
      // reply comes back rtt ms later.
      async call(command: string, ...args: (string | number)[]): Promise<unknown> {
        const readAt = local;
        const us = Math.round(redisMs(readAt) * 1000);
        local += rtt;
        if (command === 'TIME') return [String(Math.floor(us / 1e6)), String(us % 1e6)];
        // EVALSHA sha numkeys ...keys, then a batch's ARGV[1]: the number of decisions, then per
        // decision cost, deadline, want, comma-separated; or a decision alone's (the script for
        // one): ARGV[1..3], its cost, deadline, want. The reply: six numbers a decision, then TIME.
        const numkeys = Number(args[1]);
        const argv = args.slice(2 + numkeys).map(Number);
        const [nd, ...per] = (argv.length === 1 ? String(args[2 + numkeys]).split(',').map(Number) : [1, ...argv]) as [number, ...number[]];
        const out: number[] = [];
        for (let j = 0; j < nd; j++) {
          sent.push({ deadlineUs: per[3 * j + 1] as number, sentAt: readAt });
          out.push(0, 10, 0, 0, 0, per[3 * j] as number);
        }
        out.push(us);
        return out;
      },
    };
    const timeoutMs = 500;
    const r = new RedisRateLimiter({ redis: fake, localTier: false, limit: perHour(100), timeoutMs });
    // One fast exchange (the first TIME and the first decision, no delay): the offset is exact.
    await r.tryAcquire('k');
    // Then a decision every 10 s, each reply 1 ms on its way (a loaded server): none raises the
    // bound, so none relaxes it, for 900 s.
    rtt = 1;
    let worst = -Infinity;
    for (let t = 10_000; t <= 900_000; t += 10_000) {
      local = t;
      const deadline = local + timeoutMs; // the moment the limiter answers 'unavailable'
      const before = sent.length;
      await r.tryAcquire('k');
      const d = sent[before] as { deadlineUs: number };
      // How much later than Redis's clock at that moment the script's deadline is, in ms.
      worst = Math.max(worst, d.deadlineUs / 1000 - redisMs(deadline));
    }
    expect(worst, `a deadline reached Redis ${worst.toFixed(3)} ms after the limiter gave up`).toBeLessThan(0.1);
  });
});
