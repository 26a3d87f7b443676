// The algorithms suite: what each algorithm admits from the same client, one combined limiter
// against two chained ones, and what each configuration costs per check and per key.
import { ManualClock, perMinute, perSecond, RateLimiter } from 'sluice';
import { compileConfig, parseConfig } from '../dist/rate/limiter-config.js';
import { engineChoice } from '../dist/rate/engine-choice.js';
import { LabPool } from './lib/lab-pool.js';
import { BATCH, bytesPerCall, fmt, makeKeys, median, nsPerCall } from './lib/measure.js';
import { keyStream } from './lib/streams.js';
import { newLockBuffer } from './lib/variants.js';

const ALGORITHM_ORDER = ['fixed-window', 'sliding-log', 'sliding-window', 'gcra'];
const LABEL = { 'fixed-window': 'fixed window', 'sliding-log': 'sliding log', 'sliding-window': 'sliding window', gcra: 'GCRA' };

/** The acceptance figures for the same-client comparison (the same ones test/algorithms.test.ts checks). */
const EXPECTED_CLIENT = {
  'fixed-window': { total: 600, most: 200 },
  'sliding-log': { total: 500, most: 100 },
  'sliding-window': { total: 546, most: 149 },
  gcra: { total: 599, most: 199 },
};
/** The acceptance figures for one combined limiter against two chained ones. */
const EXPECTED_SEVERAL = {
  combined: { total: 59, firstSeconds: [9, 5, 5, 2, 0, 0] },
  chained: { total: 53, firstSeconds: [9, 5, 0, 1, 0, 0] },
};

const check = (ok) => (ok ? 'yes' : '**no**');

/** The most entries of sorted `times` that fall in any window of `windowMs`. */
function mostInWindow(times, windowMs) {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

// ---------------------------------------------------------------------------------------------
// 1. The same client against each algorithm.

const CLIENT = { limit: perMinute(100), startMs: 30_000, everyMs: 10, durationMs: 300_000, windowMs: 60_000 };

function attack(algorithm) {
  const clock = new ManualClock(CLIENT.startMs);
  const limiter = new RateLimiter({ limit: CLIENT.limit, algorithm, maxKeys: 4, clock });
  const times = [];
  let tries = 0;
  for (let t = CLIENT.startMs; t < CLIENT.startMs + CLIENT.durationMs; t += CLIENT.everyMs) {
    clock.set(t);
    tries++;
    if (limiter.allow('client')) times.push(t);
  }
  return { algorithm, limit: limiter.limit, tries, total: times.length, most: mostInWindow(times, CLIENT.windowMs) };
}

/** One plain sentence per algorithm; the numbers in it come from the limit the limiter holds. */
function promise(algorithm, limit) {
  const { permits, burst } = limit;
  switch (algorithm) {
    case 'fixed-window':
      return `at most ${fmt(permits)} per aligned window, so up to twice that (${fmt(2 * permits)}) across a window boundary`;
    case 'sliding-log':
      return `exact: never more than ${fmt(permits)} in any period; costs memory per permit (one 4-byte word each, ${fmt(4 * permits)} bytes per key here)`;
    case 'sliding-window':
      return `an estimate from two window counts; against a client that bursts at a window's end it can exceed ${fmt(permits)} in a period`;
    case 'gcra':
      return `a burst of ${fmt(burst)} at once plus the average rate, so up to burst + permits - 1 = ${fmt(burst + permits - 1)} in a period; with burst 1 it is a leaky bucket used as a meter`;
    default:
      return '';
  }
}

function sameClient() {
  return ALGORITHM_ORDER.map((algorithm) => {
    const r = attack(algorithm);
    const expected = EXPECTED_CLIENT[algorithm];
    return { ...r, expected, matches: r.total === expected.total && r.most === expected.most };
  });
}

// ---------------------------------------------------------------------------------------------
// 2. Several limits: one combined limiter against two chained ones.

const SEVERAL = { perSec: perSecond(5), perMin: perMinute(20), everyMs: 100, durationMs: 120_000, shownSeconds: 6 };

function severalLimits() {
  const clock = new ManualClock();
  const combined = new RateLimiter({ limit: [SEVERAL.perSec, SEVERAL.perMin], maxKeys: 4, clock });
  const perMin = new RateLimiter({ limit: SEVERAL.perMin, maxKeys: 4, clock });
  const perSec = new RateLimiter({ limit: SEVERAL.perSec, maxKeys: 4, clock });
  const out = {
    combined: { total: 0, firstSeconds: new Array(SEVERAL.shownSeconds).fill(0) },
    chained: { total: 0, firstSeconds: new Array(SEVERAL.shownSeconds).fill(0) },
  };
  const count = (row, second) => {
    row.total++;
    if (second < SEVERAL.shownSeconds) row.firstSeconds[second]++;
  };
  let tries = 0;
  for (let t = 0; t < SEVERAL.durationMs; t += SEVERAL.everyMs) {
    clock.set(t);
    tries++;
    const second = Math.floor(t / 1000);
    if (combined.allow('k')) count(out.combined, second);
    // Chained: the per-minute limiter spends before the per-second one gets to refuse.
    if (perMin.allow('k') && perSec.allow('k')) count(out.chained, second);
  }
  for (const name of ['combined', 'chained']) {
    const e = EXPECTED_SEVERAL[name];
    const r = out[name];
    r.expected = e;
    r.matches = r.total === e.total && r.firstSeconds.every((n, i) => n === e.firstSeconds[i]);
  }
  return { ...out, tries };
}

// ---------------------------------------------------------------------------------------------
// 3. Throughput and memory per key.

const KEY_COUNT = 1_000;
const PREFIX = 'a';
const STREAM_LENGTH = 1 << 20;
// Limits nothing reaches at the rates measured here (per key: total checks/s over 1,000 keys).
const WIDE = perSecond(1e6, { burst: 1e6 });
const WIDE_MINUTE = perMinute(6e7, { burst: 6e7 });
const WIDE_GLOBAL = perSecond(1e7, { burst: 1e7 }); // 32 bits wide, like the key limit; not reached
const SLIDING = perSecond(4e6); // a sliding window holds at most 2^22 - 1 permits
const LOG_SIZE = 1_000;
const LOG_LIMIT = perSecond(LOG_SIZE); // the largest log the default maxLogSize allows

function configurations() {
  return [
    { name: 'GCRA, one limit', options: { limit: WIDE } },
    { name: 'GCRA, two limits', options: { limit: [WIDE, WIDE_MINUTE] } },
    { name: 'GCRA, one limit + global cap', options: { limit: WIDE, globalLimit: WIDE_GLOBAL } },
    { name: 'fixed window', options: { limit: WIDE, algorithm: 'fixed-window' } },
    { name: 'sliding window', options: { limit: SLIDING, algorithm: 'sliding-window' } },
    { name: 'sliding log', options: { limit: LOG_LIMIT, algorithm: 'sliding-log', maxLogSize: LOG_SIZE } },
    // The same decisions under the per-key lock (the design before lock-free spends), side by side.
    { name: 'GCRA, two limits, per-key lock', options: { limit: [WIDE, WIDE_MINUTE] }, forceLocked: true },
    { name: 'GCRA, one limit + global cap, locks', options: { limit: WIDE, globalLimit: WIDE_GLOBAL }, forceLocked: true },
    { name: 'fixed window, per-key lock', options: { limit: WIDE, algorithm: 'fixed-window' }, forceLocked: true },
  ];
}

/** The targets of the lock-free spends on two workers, as a share of one GCRA limit's throughput. */
const TARGETS = [['GCRA, two limits', 0.7], ['GCRA, one limit + global cap', 0.6], ['fixed window', 0.7]];

const describeLimit = (l) => (l.periodMs === 1000 ? `${fmt(l.permits)}/s` : l.periodMs === 60_000 ? `${fmt(l.permits)}/min` : `${fmt(l.permits)} per ${fmt(l.periodMs)} ms`);

async function throughput(quick) {
  const keys = makeKeys(KEY_COUNT, PREFIX); // the same keys the lab workers build
  const stream = keyStream('uniform', KEY_COUNT, STREAM_LENGTH);
  const mask = STREAM_LENGTH - 1;
  const configs = configurations().map((c) => {
    engineChoice.forceLocked = c.forceLocked === true;
    const limiter = new RateLimiter({ maxKeys: KEY_COUNT, ...c.options });
    engineChoice.forceLocked = false;
    for (const k of keys) limiter.allow(k); // every key exists
    // Which path the library takes for these options, as it decides it itself.
    const compiled = compileConfig(parseConfig(c.options));
    const lockFree = compiled.fast !== null;
    const path = lockFree ? 'lock-free (one CAS)' : c.forceLocked || !compiled.key.lockFree ? 'per-key lock' : 'lock-free (CAS per limit)';
    const limits = [...limiter.limits.map(describeLimit), ...(limiter.globalLimit ? [`global ${describeLimit(limiter.globalLimit)}`] : [])].join(' + ');
    return { ...c, limiter, lockFree, path, limits, tableBytesPerKey: limiter.stats().tableBytes / KEY_COUNT, single: { calls: 0, allowed: 0 } };
  });

  const tasks = {};
  for (const c of configs) {
    let j = c.name.length * 7919;
    const limiter = c.limiter;
    const counts = c.single;
    tasks[c.name] = () => {
      let allowed = 0;
      for (let i = 0; i < BATCH; i++) if (limiter.allow(keys[stream[(j++) & mask]])) allowed++;
      counts.calls += BATCH;
      counts.allowed += allowed;
    };
  }
  const ns = await nsPerCall(tasks, quick ? { timeMs: 200, warmupMs: 50 } : {});
  for (const c of configs) {
    c.ns = ns[c.name];
    // Configurations that allocate per check can trigger a collection inside every 20,000-call
    // run, and such runs are discarded; shorter runs then still give a clean figure.
    for (const calls of [20_000, 5_000, 1_000]) {
      c.bytes = await bytesPerCall((i) => c.limiter.allow(keys[stream[i & mask]]), calls);
      c.bytesCalls = calls;
      if (Number.isFinite(c.bytes)) break;
    }
  }

  const ms = quick ? 100 : 500;
  const rounds = quick ? 1 : 3;
  const pool = await LabPool.start(2, { keyCount: KEY_COUNT, prefix: PREFIX, stream });
  try {
    for (const c of configs) { c.perSec = []; c.allowedShare = []; c.mutexPerSec = []; }
    for (let r = 0; r < rounds; r++) { // rounds alternate between configurations
      for (const c of configs) {
        const res = await pool.throughput('cas', c.limiter.handle, newLockBuffer(), ms);
        c.perSec.push(res.perSec);
        c.allowedShare.push(res.allowed);
        if (!c.forceLocked) c.mutexPerSec.push((await pool.throughput('global-mutex', c.limiter.handle, newLockBuffer(), ms)).perSec);
      }
    }
  } finally {
    await pool.close();
  }
  return { configs, ms, rounds };
}

// ---------------------------------------------------------------------------------------------

export async function runAlgorithms({ quick = false } = {}) {
  const client = sameClient();
  const several = severalLimits();
  const tp = await throughput(quick);
  const lines = [];

  const L = client[0].limit;
  lines.push('## Algorithms: the same client against each', '');
  lines.push(`Limit ${fmt(L.permits)} per minute (GCRA with its default burst, ${fmt(client.find((r) => r.algorithm === 'gcra').limit.burst)}), one key. ` +
    `A client tries every ${fmt(CLIENT.everyMs)} ms for ${fmt(CLIENT.durationMs / 60_000)} minutes (${fmt(client[0].tries)} tries) on a ManualClock starting at ${fmt(CLIENT.startMs)} ms, halfway through a minute. ` +
    `"Most in any ${fmt(CLIENT.windowMs / 1000)} s" slides a ${fmt(CLIENT.windowMs)} ms window over the admission times.`, '');
  lines.push(`| algorithm | allowed in ${fmt(CLIENT.durationMs / 60_000)} min | most in any ${fmt(CLIENT.windowMs / 1000)} s | expected | as expected | what it promises |`, '|---|---:|---:|---:|---|---|');
  for (const r of client) {
    lines.push(`| ${LABEL[r.algorithm]} | ${fmt(r.total)} | ${fmt(r.most)} | ${fmt(r.expected.total)} / ${fmt(r.expected.most)} | ${check(r.matches)} | ${promise(r.algorithm, r.limit)} |`);
  }
  const within = client.filter((r) => r.most <= r.limit.permits);
  const over = client.filter((r) => r.most > r.limit.permits);
  lines.push('', `Never more than ${fmt(L.permits)} in any ${fmt(CLIENT.windowMs / 1000)} s: ${within.map((r) => LABEL[r.algorithm]).join(', ') || 'none'}. ` +
    `More: ${over.map((r) => `${LABEL[r.algorithm]} ${fmt(r.most)} (${fmt(r.most / r.limit.permits, 2)}x)`).join(', ') || 'none'}.`);

  const pad = (a) => `[${a.join(', ')}]`;
  lines.push('', '## Algorithms: several limits', '');
  lines.push(`${fmt(1000 / SEVERAL.everyMs)} requests a second for ${fmt(SEVERAL.durationMs / 60_000)} minutes (${fmt(several.tries)} tries, one key) against ${describeLimit(SEVERAL.perSec)} and ${describeLimit(SEVERAL.perMin)}, GCRA. ` +
    'Combined: one limiter with `limit: [perSecond(5), perMinute(20)]`, which spends from both limits or from neither. ' +
    'Chained: two limiters, the per-minute one checked first (`perMin.allow(k) && perSec.allow(k)`), so a request the per-second limiter refuses has already spent a per-minute permit.', '');
  lines.push(`| limiters | allowed in ${fmt(SEVERAL.durationMs / 60_000)} min | allowed per second, first ${SEVERAL.shownSeconds} s | expected | as expected |`, '|---|---:|---|---|---|');
  for (const name of ['combined', 'chained']) {
    const r = several[name];
    lines.push(`| ${name} | ${fmt(r.total)} | ${pad(r.firstSeconds)} | ${fmt(r.expected.total)}, ${pad(r.expected.firstSeconds)} | ${check(r.matches)} |`);
  }
  const wasted = several.combined.total - several.chained.total;
  const dry = several.chained.firstSeconds.findIndex((n) => n === 0);
  lines.push('', `Chaining loses ${fmt(wasted)} of the ${fmt(several.combined.total)} requests the two limits together allow ` +
    `(${fmt((wasted / several.combined.total) * 100, 1)}%): each request the per-second limiter refused had already spent a per-minute permit` +
    (dry >= 0 ? `, so the chain ran dry in second ${dry + 1}.` : '.'));

  const { configs, ms, rounds } = tp;
  const base = configs[0];
  lines.push('', '## Algorithms: throughput and memory per key', '');
  lines.push(`${fmt(KEY_COUNT)} existing keys of 24 characters, drawn from one uniform stream; limits nothing reaches here (see the allowed column). ` +
    `Single thread: \`allow\`, ${fmt(BATCH)} calls per tinybench iteration, ns per call (median, p25-p75); bytes per call: heap growth over 20,000 calls without a collection (fewer where noted, when every 20,000-call run collected). ` +
    `Two workers: \`RateLimiter.attach\` in each, both walking the same stream from different offsets, checks/s over both (median of ${rounds} round${rounds > 1 ? 's' : ''} of ${fmt(ms)} ms, rounds alternating between rows). ` +
    'Table bytes per key: `stats().tableBytes / maxKeys` (the table has two slots per key). Ratios are against the first row. ' +
    '"Global mutex": the same limiter, each whole decision inside one global lock (bench/lib/variants.js), in the same rounds.', '');
  lines.push('| configuration | limits | path | ns/call median | p25-p75 | vs GCRA | bytes/call | table bytes per key | 2 workers checks/s | vs GCRA | global mutex, 2 workers | allowed (1 thread / 2 workers) |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of configs) {
    const perSec = median(c.perSec);
    lines.push(`| ${c.name} | ${c.limits} | ${c.path} | ${fmt(c.ns.median, 1)} | ${fmt(c.ns.p25, 1)}-${fmt(c.ns.p75, 1)} | ` +
      `${fmt(c.ns.median / base.ns.median, 2)}x | ${fmt(c.bytes, 1)}${c.bytesCalls === 20_000 ? '' : ` (${fmt(c.bytesCalls)} calls)`} | ${fmt(c.tableBytesPerKey, 1)} | ${fmt(perSec)} | ${fmt(perSec / median(base.perSec), 2)}x | ${c.mutexPerSec.length ? fmt(median(c.mutexPerSec)) : '-'} | ` +
      `${fmt((c.single.allowed / c.single.calls) * 100, 1)}% / ${fmt(median(c.allowedShare) * 100, 1)}% |`);
  }
  const byName = (n) => configs.find((c) => c.name === n);
  lines.push('', '| target (2 workers, share of one GCRA limit) | lock-free | per-key lock | global mutex | met |', '|---|---:|---:|---:|---|');
  for (const [name, target] of TARGETS) {
    const c = byName(name);
    const lockedRow = configs.find((x) => x.forceLocked && x.name.startsWith(name));
    const share = (x) => median(x) / median(base.perSec);
    lines.push(`| ${name}: at least ${fmt(target, 1)}x | ${fmt(share(c.perSec), 3)}x | ${lockedRow ? `${fmt(share(lockedRow.perSec), 2)}x` : '-'} | ${fmt(share(c.mutexPerSec), 2)}x | ${share(c.perSec) >= target ? 'yes' : 'missed'} |`);
  }
  const log = configs.find((c) => c.options.algorithm === 'sliding-log');
  lines.push('', 'Every configuration but the sliding log decides without a lock: it snapshots each limit, decides on the snapshot, and commits each by ' +
    'compareExchange from it (docs/design.md, "Lock-free spends"). The "per-key lock" rows run the same decisions under the key\'s lock (and the cap\'s), as every multi-word configuration did before. ' +
    'The lock-free global cap serves `allow()` from per-thread batches of the cap (docs/design.md, "Batches of a global cap"); the locked row takes the cap\'s lock on every check.');
  lines.push('', `The sliding log reads its whole log on every check: ${fmt(log.limiter.limit.permits)} words (${fmt(4 * log.limiter.limit.permits)} bytes of state per key, ` +
    `${fmt(log.tableBytesPerKey / 1024, 1)} KB of table per key with two slots per key), so it costs ${fmt(log.ns.median / base.ns.median, 1)}x the lock-free GCRA per check.`);

  return {
    markdown: lines.join('\n'),
    figures: {
      client,
      several,
      throughput: configs.map((c) => ({
        name: c.name, limits: c.limits, lockFree: c.lockFree, path: c.path, mutexPerSec: c.mutexPerSec, ns: c.ns, bytes: c.bytes, tableBytesPerKey: c.tableBytesPerKey,
        bytesCalls: c.bytesCalls, perSec: c.perSec, allowedShare: c.allowedShare, singleAllowed: c.single.allowed / c.single.calls,
      })),
    },
  };
}
