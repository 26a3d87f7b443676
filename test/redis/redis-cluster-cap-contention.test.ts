// Exact cap refunds on a Redis Cluster under contention (found: GCRA with a global cap admitted
// about 30% under its bound, when a refused key's cap spend came back as if the cap had drained
// since the spend). 4 workers, each with its own cluster client and 32 calls in flight, run for
// 2 s: half their calls on 20 hot keys (3 an hour: spent at once, then refused by the key
// after the cap spent for them, each spend refunded), half on 5,000 cold keys that always have
// room, under a cap on its own node that is fuller than the calls can drain. What the cap admits
// must come within 5% of what it could admit of the calls that came (its bound: its burst, and
// its rate from the first call's start to the last call's end, unless the calls came slower), and
// never above the bound. A run whose calls did not outrun the cap (a busy machine) says
// nothing of the cap, so it runs again at a slower cap, up to three rates.
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  async function run(rate: number, prefix: string): Promise<{ total: Record<string, number>; bound: number; reachable: number; elapsedMs: number }> {
    // Half a second of burst: a stall of every worker shorter than that loses the cap nothing.
    const burst = rate / 2;
    const gate = new SharedArrayBuffer(8);
    const workers = Array.from({ length: WORKERS }, (_, w) => new Worker(new URL('../fixtures/cluster-cap-worker.mjs', import.meta.url), {
      workerData: {
        nodes: cluster.nodes, prefix, inFlight: 32, durationMs: 2_000, hot: HOT, cold: 5_000, keyPerHour: KEY_PER_HOUR, capPerSecond: rate, capBurst: burst, gate,
        seed: 0x5eed + w,
      },
    }));
    try {
      const replies = workers.map((w) => new Promise<{ reasons: Record<string, number>; first: number; last: number; answered: number[] }>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }));
      const g = new Int32Array(gate);
      const deadline = Date.now() + 30_000;
      while (Atomics.load(g, 0) < WORKERS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      Atomics.store(g, 1, 1);
      Atomics.notify(g, 1);
      const counts = await Promise.all(replies);
      // From the first call's start to the last one's end: every decision's reading lies within.
      const elapsedMs = Math.max(...counts.map((c) => c.last)) - Math.min(...counts.map((c) => c.first));
      const total: Record<string, number> = {};
      for (const c of counts) for (const [k, v] of Object.entries(c.reasons)) total[k] = (total[k] ?? 0) + v;
      // The cap admits its burst and then its rate: over the run, at most this many.
      const bound = Math.floor(burst + (rate * elapsedMs) / 1000) + 1;
      // What the cap could have admitted of the calls that came: a bucket of its burst and rate
      // run over the answer times of the calls on cold keys (which always have room), plus the hot
      // keys' own admissions. On a busy machine the calls can come slower than the cap refills for
      // a while, or stop: the cap then fills to its burst and refills no further.
      const times = counts.flatMap((c) => c.answered).sort((x, y) => x - y);
      const start = Math.min(...counts.map((c) => c.first));
      let tokens = burst;
      let at = start;
      let taken = 0;
      for (const t of times) {
        tokens = Math.min(burst, tokens + ((t - at) * rate) / 1000);
        at = t;
        if (tokens >= 1) { tokens -= 1; taken++; }
      }
      return { total, bound, reachable: Math.min(bound, taken + HOT * KEY_PER_HOUR), elapsedMs };
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }

  it('GCRA keys under a cap: within 5% of the cap\'s bound, never above, while refused keys\' spends are refunded', async () => {
    let judged = false;
    for (const [i, rate] of RATES.entries()) {
      const { total, bound, reachable, elapsedMs } = await run(rate, `cap-contention-${i}:`);
      const admitted = total.admitted ?? 0;
      console.log(`cluster cap under contention, cap ${rate}/s: ${JSON.stringify(total)} in ${elapsedMs.toFixed(0)} ms, bound ${bound}, reachable ${reachable}`);
      expect(total.unavailable ?? 0, 'degraded answers: the run says nothing').toBe(0);
      expect(admitted, 'above the cap').toBeLessThanOrEqual(bound);
      // The calls outran the cap (it refused many) and keys refused after its spends (refunds).
      if ((total['global-limit'] ?? 0) < 200 || (total.limited ?? 0) < 200) continue;
      // Within 5% of what the cap could admit of the calls that came: its bound on a quiet machine
      // (found on a busy one: 4,549 admitted of a bound of 5,029, judged against the bound).
      expect(admitted, 'short of the cap: refunds lost').toBeGreaterThanOrEqual(Math.floor(0.95 * reachable));
      judged = true;
      break;
    }
    expect(judged, 'no run outran the cap').toBe(true);
  }, 120_000);
});
