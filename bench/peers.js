// The peers suite: sluice against the limiters people use today, in one process and one run.
// One thread on existing keys (mostly allowed, then mostly rejected) against the plain Map GCRA,
// rate-limiter-flexible's RateLimiterMemory and limiter's TokenBucket; then a piscina pool where
// every check is a message to the one thread that owns the state. Returns a markdown section.
import { TokenBucket } from 'limiter';
import { Piscina } from 'piscina';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { coarseClock, perHour, perSecond, RateLimiter } from 'sluice';
import { createMapGcra } from './lib/map-gcra.js';
import { BATCH, bytesPerRun, fmt, makeKeys, median, nsPerCall, percentile } from './lib/measure.js';

const KEYS = 1_000;
const IN_FLIGHT = 64;
const COUNT_PASSES = 10; // outcome check before timing: every key this many times
const BYTES_CALLS = 5_000; // calls per allocation run

const SLUICE_TRY = 'sluice tryAcquire';
const SLUICE_ALLOW = 'sluice allow (boolean)';
const SLUICE_COARSE = 'sluice tryAcquire, coarseClock()';
const MAP = 'Map GCRA tryAcquire (no sharing)';
const RLM = 'rate-limiter-flexible RateLimiterMemory consume';
const BUCKET = 'limiter TokenBucket tryRemoveTokens';
const ORDER = [SLUICE_TRY, SLUICE_ALLOW, SLUICE_COARSE, MAP, RLM, BUCKET];

// The same limit in each contestant's own terms. The "allowed" limit must match
// bench/lib/piscina-owner.js.
const WORKLOADS = [
  {
    id: 'allowed',
    title: 'mostly allowed',
    expectAllowed: true,
    limit: perSecond(5e7, { burst: 5e7 }),
    limitText: 'perSecond(50,000,000, { burst: 50,000,000 })',
    rlm: { points: 5e7, duration: 1 },
    bucket: { bucketSize: 5e7, tokensPerInterval: 5e7, interval: 'second' },
  },
  {
    id: 'rejected',
    title: 'mostly rejected',
    expectAllowed: false,
    limit: perHour(1, { burst: 1 }),
    limitText: 'perHour(1, { burst: 1 })',
    rlm: { points: 1, duration: 3_600 },
    bucket: { bucketSize: 1, tokensPerInterval: 1, interval: 'hour' },
  },
];

/** Where the object-returning checks leave their Decision, so V8 cannot optimise the object away. */
export let sink;

/**
 * `n` RateLimiterMemory checks awaited one after another, starting at key index `from`; returns how
 * many were allowed. A refusal rejects with a RateLimiterRes; anything else is a real error.
 */
async function rlmCalls(rlm, keys, from, n) {
  let allowed = 0;
  for (let i = from; i < from + n; i++) {
    try {
      await rlm.consume(keys[i % KEYS], 1);
      allowed++;
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
    }
  }
  return allowed;
}

/** Builds every contestant for one workload over `keys`, each key spent once. */
async function contestants(w, keys) {
  const sluice = new RateLimiter({ limit: w.limit, maxKeys: 10_000 });
  const coarse = new RateLimiter({ limit: w.limit, maxKeys: 10_000, clock: coarseClock() });
  const map = createMapGcra(w.limit);
  // keyPrefix '' spares RateLimiterMemory a string concatenation per call (its cheapest setup).
  const rlm = new RateLimiterMemory({ ...w.rlm, keyPrefix: '' });
  // limiter has no keyed API: one TokenBucket per key, found through a Map (the lookup is timed).
  // A standalone TokenBucket starts empty; `content` (a public field) is set to full so that, like
  // every other contestant, a key starts with its whole burst.
  const buckets = new Map();
  for (const k of keys) {
    const b = new TokenBucket(w.bucket);
    b.content = b.bucketSize;
    buckets.set(k, b);
  }
  const sync = {
    [SLUICE_TRY]: (k) => (sink = sluice.tryAcquire(k)).allowed,
    [SLUICE_ALLOW]: (k) => sluice.allow(k),
    [SLUICE_COARSE]: (k) => (sink = coarse.tryAcquire(k)).allowed,
    [MAP]: (k) => (sink = map.tryAcquire(k)).allowed,
    [BUCKET]: (k) => buckets.get(k).tryRemoveTokens(1),
  };
  // Spend each key once: sluice's two rows share one limiter, so it is spent once for both.
  for (const k of keys) { sluice.allow(k); coarse.allow(k); map.allow(k); buckets.get(k).tryRemoveTokens(1); }
  await rlmCalls(rlm, keys, 0, keys.length);
  return { sync, rlm };
}

async function singleThread(w, keys, quick) {
  const { sync, rlm } = await contestants(w, keys);
  const calls = COUNT_PASSES * KEYS;
  const allowedFraction = {};
  for (const [name, check] of Object.entries(sync)) {
    let allowed = 0;
    for (let i = 0; i < calls; i++) if (check(keys[i % KEYS])) allowed++;
    allowedFraction[name] = allowed / calls;
  }
  allowedFraction[RLM] = (await rlmCalls(rlm, keys, 0, calls)) / calls;

  let j = 0;
  const batch = (check) => () => { for (let i = 0; i < BATCH; i++) check(keys[(j++) % KEYS]); };
  const tasks = {};
  for (const [name, check] of Object.entries(sync)) tasks[name] = batch(check);
  tasks[RLM] = async () => { await rlmCalls(rlm, keys, j, BATCH); j += BATCH; };
  const res = await nsPerCall(tasks, quick ? { timeMs: 150, warmupMs: 50 } : {});

  const bytesRuns = {};
  const loop = (check) => (n) => { for (let i = 0; i < n; i++) check(keys[i % KEYS]); };
  for (const [name, check] of Object.entries(sync)) bytesRuns[name] = await bytesPerRun(loop(check), BYTES_CALLS);
  bytesRuns[RLM] = await bytesPerRun((n) => rlmCalls(rlm, keys, 0, n), BYTES_CALLS);
  const bytes = Object.fromEntries(Object.entries(bytesRuns).map(([name, b]) => [name, b.bytes]));
  return { res, bytes, bytesRuns, allowedFraction };
}

async function piscinaOwner(keys, quick) {
  const pool = new Piscina({ filename: new URL('./lib/piscina-owner.js', import.meta.url).href, minThreads: 1, maxThreads: 1 });
  try {
    let checks = 0;
    let allowed = 0;
    const one = async (key) => { checks++; if (await pool.run({ key })) allowed++; };
    for (let i = 0; i < 2_000; i++) await one(keys[i % KEYS]); // start the thread, warm both sides

    const perBatch = quick ? 200 : 1_000;
    const latencyNs = [];
    for (let b = 0; b < (quick ? 5 : 20); b++) {
      const t0 = performance.now();
      for (let i = 0; i < perBatch; i++) await one(keys[i % KEYS]);
      latencyNs.push(((performance.now() - t0) * 1e6) / perBatch);
    }

    const perRound = IN_FLIGHT * (quick ? 100 : 1_000);
    const throughput = [];
    for (let r = 0; r < (quick ? 3 : 10); r++) {
      const t0 = performance.now();
      for (let c = 0; c < perRound; c += IN_FLIGHT) {
        await Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => one(keys[(c + i) % KEYS])));
      }
      throughput.push(perRound / ((performance.now() - t0) / 1000));
    }
    return { latencyNs, throughput, perBatch, perRound, allowedFraction: allowed / checks, checks };
  } finally {
    await pool.destroy();
  }
}

const verdict = (ok) => (ok ? 'met' : '**missed**');
const matches = (w, fraction) => (w.expectAllowed ? fraction >= 0.99 : fraction <= 0.01);
/** "2.50x faster than X" or "1.30x slower than X", from X's time divided by ours. */
const against = (ratio, name) => (ratio >= 1 ? `${fmt(ratio, 2)}x faster than ${name}` : `${fmt(1 / ratio, 2)}x slower than ${name}`);

export async function runPeers({ quick = false } = {}) {
  const keys = makeKeys(KEYS);
  const runs = {};
  for (const w of WORKLOADS) runs[w.id] = await singleThread(w, keys, quick);
  const owner = await piscinaOwner(keys, quick);

  const ratios = {};
  for (const w of WORKLOADS) {
    const { res } = runs[w.id];
    ratios[w.id] = Object.fromEntries(ORDER.map((name) => [name, res[name].median / res[SLUICE_TRY].median]));
  }

  const lines = [];
  for (const w of WORKLOADS) {
    const { res, bytes, bytesRuns, allowedFraction } = runs[w.id];
    lines.push(`## Peers: one thread, existing keys, ${w.title} (${fmt(KEYS)} keys, 24-character strings)`, '');
    lines.push(`Limit: sluice and the Map GCRA \`${w.limitText}\`; RateLimiterMemory \`{ points: ${fmt(w.rlm.points)}, duration: ${fmt(w.rlm.duration)} }\` (seconds);`,
      `TokenBucket \`{ bucketSize: ${fmt(w.bucket.bucketSize)}, tokensPerInterval: ${fmt(w.bucket.tokensPerInterval)}, interval: '${w.bucket.interval}' }\`, one per key in a \`Map\`.`,
      `Every key was spent once during setup. Each tinybench iteration makes ${fmt(BATCH)} calls; figures are ns per call (median, p25-p75 over samples).`,
      `"allowed" is the fraction allowed over ${fmt(COUNT_PASSES * KEYS)} calls counted before timing. RateLimiterMemory's calls are awaited one after another.`,
      'Every check reads its outcome; the tryAcquire rows also keep their Decision object (as a caller that sets headers from it would), so it is really allocated.',
      'sluice runs on the default clock (`performance.now()`) except in the coarseClock() row.', '');
    lines.push('| contestant | allowed | ns/call median | p25-p75 | bytes/call | vs sluice tryAcquire |', '|---|---:|---:|---:|---:|---:|');
    for (const name of ORDER) {
      const r = res[name];
      const ok = matches(w, allowedFraction[name]);
      lines.push(`| ${name} | ${fmt(allowedFraction[name], 3)}${ok ? '' : ' **(not the workload)**'} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ${fmt(bytes[name], 1)} | ${fmt(ratios[w.id][name], 2)}x |`);
    }
    const clean = Object.values(bytesRuns).reduce((n, b) => n + b.runs, 0);
    const tried = Object.values(bytesRuns).reduce((n, b) => n + b.attempts, 0);
    lines.push('', `bytes/call: heap growth over ${fmt(BYTES_CALLS)} calls, min over runs with no garbage collection (${fmt(clean)} such runs out of ${fmt(tried)} tried, all rows);`,
      'for RateLimiterMemory it includes the promise, the await and the RateLimiterRes of every call.');
    lines.push('');
  }

  const sluiceNs = runs.allowed.res[SLUICE_TRY].median;
  const sluicePerSec = 1e9 / sluiceNs;
  const latMedian = median(owner.latencyNs);
  const tputMedian = median(owner.throughput);
  lines.push('## Peers: a piscina owner thread (one message per check)', '');
  lines.push('One piscina thread (minThreads = maxThreads = 1) owns a Map GCRA with the "mostly allowed" limit; every check is `pool.run({ key })`.',
    `Latency: ${fmt(owner.perBatch)} checks awaited one at a time per batch, ${fmt(owner.latencyNs.length)} batches.`,
    `Throughput: ${fmt(IN_FLIGHT)} checks in flight at once (\`Promise.all\` over chunks), ${fmt(owner.perRound)} checks per round, ${fmt(owner.throughput.length)} rounds.`,
    `The owner allowed ${fmt(owner.allowedFraction, 3)} of the ${fmt(owner.checks)} checks sent${matches(WORKLOADS[0], owner.allowedFraction) ? '' : ' **(not the workload)**'}.`, '');
  lines.push('| measure | median | p25-p75 | sluice tryAcquire on the calling thread | ratio |', '|---|---:|---:|---:|---:|');
  lines.push(`| ns per check, one at a time | ${fmt(latMedian)} | ${fmt(percentile(owner.latencyNs, 0.25))}-${fmt(percentile(owner.latencyNs, 0.75))} | ${fmt(sluiceNs, 1)} | ${fmt(latMedian / sluiceNs)}x slower |`);
  lines.push(`| checks/s, ${fmt(IN_FLIGHT)} in flight | ${fmt(tputMedian)} | ${fmt(percentile(owner.throughput, 0.25))}-${fmt(percentile(owner.throughput, 0.75))} | ${fmt(sluicePerSec)} | ${fmt(sluicePerSec / tputMedian, 1)}x fewer |`);
  lines.push('', 'The sluice column is the "mostly allowed" median above (checks/s is 1e9 / ns per call, one thread).', '');

  const allowedRatio = ratios.allowed[RLM];
  const rejectedRatio = ratios.rejected[RLM];
  const vsCoarse = (id) => runs[id].res[RLM].median / runs[id].res[SLUICE_COARSE].median;
  lines.push('## Peers: targets', '');
  lines.push('| target | default clock | coarseClock() | |', '|---|---:|---:|---|');
  lines.push(`| sluice tryAcquire at least 3x faster than RateLimiterMemory on allowed requests | ${fmt(allowedRatio, 2)}x | ${fmt(vsCoarse('allowed'), 2)}x | ${verdict(Math.max(allowedRatio, vsCoarse('allowed')) >= 3)} |`);
  lines.push(`| sluice tryAcquire at least 8x faster than RateLimiterMemory on rejected requests | ${fmt(rejectedRatio, 2)}x | ${fmt(vsCoarse('rejected'), 2)}x | ${verdict(Math.max(rejectedRatio, vsCoarse('rejected')) >= 8)} |`);
  const mapVsRlm = (id) => runs[id].res[RLM].median / runs[id].res[MAP].median;
  lines.push('', '"Measured" is RateLimiterMemory\'s ns/call divided by sluice tryAcquire\'s (on each clock), same run.',
    `For scale, the same ratio for the Map GCRA's tryAcquire, which shares nothing and reads performance.now(): ${fmt(mapVsRlm('allowed'), 2)}x on allowed requests, ${fmt(mapVsRlm('rejected'), 2)}x on rejected ones.`, '');

  lines.push('## Peers: conclusions', '');
  for (const w of WORKLOADS) {
    const r = ratios[w.id];
    const ns = runs[w.id].res[SLUICE_TRY].median;
    const vsMap = r[MAP] <= 1
      ? `it takes ${fmt(1 / r[MAP], 2)}x the time of the unshared Map GCRA, the price of keeping the state where every thread can use it`
      : `it is even ${fmt(r[MAP], 2)}x faster than the unshared Map GCRA`;
    lines.push(`- ${w.title[0].toUpperCase()}${w.title.slice(1)}: sluice tryAcquire takes ${fmt(ns, 1)} ns per check, ${against(r[RLM], 'RateLimiterMemory')} and ${against(r[BUCKET], 'a TokenBucket per key')}; ${vsMap}.`);
  }
  const rlmGrowth = runs.rejected.res[RLM].median / runs.allowed.res[RLM].median;
  const sluiceGrowth = runs.rejected.res[SLUICE_TRY].median / runs.allowed.res[SLUICE_TRY].median;
  lines.push(`- A refusal costs RateLimiterMemory ${fmt(rlmGrowth, 2)}x its allowed check (it rejects a promise with a RateLimiterRes), and sluice tryAcquire ${fmt(sluiceGrowth, 2)}x.`);
  lines.push(`- Allocation per check: sluice tryAcquire ${fmt(runs.allowed.bytes[SLUICE_TRY], 1)} B allowed and ${fmt(runs.rejected.bytes[SLUICE_TRY], 1)} B rejected;`
    + ` RateLimiterMemory ${fmt(runs.allowed.bytes[RLM], 1)} B and ${fmt(runs.rejected.bytes[RLM], 1)} B.`);
  lines.push(`- Sending each check to an owner thread through piscina costs ${fmt(latMedian / 1000, 1)} µs when awaited one at a time, ${fmt(latMedian / sluiceNs)}x a sluice check on the calling thread;`
    + ` with ${fmt(IN_FLIGHT)} in flight the owner answers ${fmt(tputMedian)} checks/s, ${fmt(sluicePerSec / tputMedian, 1)}x fewer than one thread checking with sluice directly,`
    + ` which is ${fmt(tputMedian / (1e9 / latMedian), 2)}x the rate the one-at-a-time latency implies: the owner is one thread running one task at a time`
    + ' (piscina\'s default), so it and the messages to it are the bottleneck however many checks are in flight.');
  const mismatches = [];
  for (const w of WORKLOADS) for (const name of ORDER) if (!matches(w, runs[w.id].allowedFraction[name])) mismatches.push(`${name} (${w.title})`);
  if (mismatches.length) lines.push(`- **Outcomes off the workload**, so those rows time something else: ${mismatches.join(', ')}.`);
  lines.push(`- Targets: ${verdict(Math.max(allowedRatio, vsCoarse('allowed')) >= 3)} on allowed requests, ${verdict(Math.max(rejectedRatio, vsCoarse('rejected')) >= 8)} on rejected ones (either clock).`);
  lines.push('', 'Semantics differ: RateLimiterMemory counts points in fixed windows of `duration` seconds (up to twice the limit across a window edge);',
    'TokenBucket is a token bucket with no notion of keys; sluice and the Map GCRA run GCRA. Each is configured for the same rate and burst,',
    mismatches.length
      ? 'but the "allowed" column shows that not every contestant allowed or refused what its workload says (see above).'
      : 'and the "allowed" column shows that each really allowed or refused what its workload says.',
    'TokenBucket.tryRemoveTokens is a synchronous check-and-spend, so it fits a per-key check with one bucket per key.');

  return {
    markdown: lines.join('\n'),
    figures: { single: runs, ratios, owner, targets: { allowedRatio, rejectedRatio, coarse: { allowed: vsCoarse('allowed'), rejected: vsCoarse('rejected') } } },
  };
}
