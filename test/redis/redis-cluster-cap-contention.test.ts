// Exact cap refunds on a Redis Cluster under contention (found: GCRA with a global cap admitted
// about 30% under its bound, when a refused key's cap spend came back as if the cap had drained
// since the spend). 4 workers, each with its own cluster client and 32 calls in flight, run for
// 2 s: half their calls on 20 hot keys (3 an hour: spent at once, then refused by the key
// after the cap spent for them, each spend refunded), half on 5,000 cold keys that always have
// room, under a cap on its own node. The cap's burst is spent just before the gate opens, so it
// is saturated from the first call: a refund then comes back whole as long as it is sent within
// a burst (a second) of its spend, however slow the machine. What the cap admits must never pass
// its rate since the fill, and must come within 5% of what it could admit of the calls that came
// (found on a busy machine: 1,187 admitted where a bucket over the calls' answer times took
// 1,299, when the cap still had its burst at the start and refunds of spends made while it
// filled came back in part). A run whose calls did not outrun the cap (a busy machine) says
// nothing of the cap, so it runs again at a slower cap, up to three rates (found: the third
// could never run, its half-second burst of 62.5 a RangeError).
import { Worker } from 'node:worker_threads';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { perSecond, RedisRateLimiter } from '../../src/index.js';
import { redisAvailable, startCluster, type TestCluster } from '../helpers/redis-cluster.js';

const available = redisAvailable();
const WORKERS = 4;
const RATES = [2_000, 500, 125];
/** Hot keys, and what each admits in the run (an hour's limit, spent at once). */
const HOT = 20;
const KEY_PER_HOUR = 3;

describe.skipIf(!available)('the global cap on a Cluster, under contention', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  /** One run at a cap of `rate` a second: every reason's count, and the cap's bound for the run. */
  async function run(rate: number, prefix: string): Promise<{ total: Record<string, number>; bound: number; reachable: number; inTransit: number; elapsedMs: number; fillMs: number }> {
    // A second of burst: the cap's debt stays about a second ahead while it is saturated, so a
    // refund sent less than a second after its spend finds all of the spend's slot still ahead.
    const burst = rate;
    const gate = new SharedArrayBuffer(8);
    const workers = Array.from({ length: WORKERS }, (_, w) => new Worker(new URL('../fixtures/cluster-cap-worker.mjs', import.meta.url), {
      workerData: {
        nodes: cluster.nodes, prefix, inFlight: 32, durationMs: 2_000, hot: HOT, cold: 5_000, keyPerHour: KEY_PER_HOUR, capPerSecond: rate, capBurst: burst, gate,
        seed: 0x5eed + w,
      },
    }));
    // The same cap (the same prefix, algorithm and numbers: the same Redis key), on a key of its
    // own that has room for the whole burst.
    const io = new Cluster(cluster.nodes);
    const filler = new RedisRateLimiter({
      redis: io, prefix, prefixCheck: 'off', localTier: false, timeoutMs: 5_000,
      limit: perSecond(rate, { burst }), globalLimit: perSecond(rate, { burst }),
    });
    try {
      // A probe first (cost 0, nothing spent), as each worker makes: the filler's client connected
      // and Redis's clock learnt, so that the fill below is one round trip and the bound, which
      // runs from before it, holds no time the cap did not have.
      await filler.tryAcquire('fill', 0);
      const replies = workers.map((w) => new Promise<{ reasons: Record<string, number>; first: number; last: number; began: number[]; refundsSent: number[] }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }));
      const g = new Int32Array(gate);
      const deadline = Date.now() + 30_000;
      while (Atomics.load(g, 0) < WORKERS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      // All but one of the cap's burst, spent between these two readings.
      const fillFrom = performance.now();
      const fill = await filler.tryAcquire('fill', burst - 1);
      const filledBy = performance.now();
      expect(fill.allowed, 'the fill').toBe(true);
      Atomics.store(g, 1, 1);
      Atomics.notify(g, 1);
      const counts = await Promise.all(replies);
      const last = Math.max(...counts.map((c) => c.last));
      const elapsedMs = last - Math.min(...counts.map((c) => c.first));
      const total: Record<string, number> = {};
      for (const c of counts) for (const [k, v] of Object.entries(c.reasons)) total[k] = (total[k] ?? 0) + v;
      // After the fill the cap had one permit left and its rate: every decision of the run lies
      // before the last call's end, and the fill came after fillFrom.
      const bound = Math.floor(1 + (rate * (last - fillFrom)) / 1000) + 1;
      // What the cap could have admitted of the calls that came: a bucket of its burst and rate,
      // with one permit at filledBy (the fill came before it), run over the times at which the
      // calls it kept a spend of began (it decided each later, and a bucket that sees its calls
      // later admits no fewer). On a busy machine the calls can come slower than the cap refills
      // for a while, or stop: the cap then fills to its burst and refills no further.
      const times = counts.flatMap((c) => c.began).sort((x, y) => x - y);
      let tokens = 1;
      let at = filledBy;
      let taken = 0;
      for (const t of times) {
        tokens = Math.min(burst, tokens + ((t - at) * rate) / 1000);
        at = t;
        if (tokens >= 1) { tokens -= 1; taken++; }
      }
      // Refunds sent after the last call began: the model above lets the last calls take their
      // permits, which came back after them (a refund travels as a call does). A few on a quiet
      // machine; on a busy one, whose stalls keep many calls in flight at the end, as many as
      // those calls refused (found: 775 admitted, 776 needed).
      const lastCall = times.length === 0 ? 0 : times[times.length - 1]!;
      const inTransit = counts.reduce((n, c) => n + c.refundsSent.filter((sent) => sent >= lastCall).length, 0);
      return { total, bound, reachable: Math.min(bound, taken), inTransit, elapsedMs, fillMs: filledBy - fillFrom };
    } finally {
      io.disconnect();
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }

  it('GCRA keys under a cap: within 5% of the cap\'s bound, never above, while refused keys\' spends are refunded', async () => {
    let judged = false;
    for (const [i, rate] of RATES.entries()) {
      const { total, bound, reachable, inTransit, elapsedMs, fillMs } = await run(rate, `cap-contention-${i}:`);
      const admitted = total.admitted ?? 0;
      console.log(`cluster cap under contention, cap ${rate}/s: ${JSON.stringify(total)} in ${elapsedMs.toFixed(0)} ms (the fill ${fillMs.toFixed(1)} ms), bound ${bound}, reachable ${reachable}, refunds sent after the last call ${inTransit}`);
      expect(total.unavailable ?? 0, 'degraded answers: the run says nothing').toBe(0);
      expect(admitted, 'above the cap').toBeLessThanOrEqual(bound);
      // The calls outran the cap (it refused many), and keys refused after its spends often
      // enough (refunds: a quarter of the bound) that losing a fifth of them shows.
      if ((total['global-limit'] ?? 0) < 200 || (total.limited ?? 0) < bound / 4) continue;
      // Within 5% of what the cap could admit of the calls that came: its bound on a quiet machine
      // (found on a busy one: 4,549 admitted of a bound of 5,029, judged against the bound).
      // A refund that came back only in part leaves the cap short by what it kept.
      expect(admitted, 'short of the cap: refunds lost').toBeGreaterThanOrEqual(Math.floor(0.95 * reachable) - inTransit);
      judged = true;
      break;
    }
    expect(judged, 'no run outran the cap').toBe(true);
  }, 120_000);
});
