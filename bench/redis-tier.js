// The Redis local-tier suite, on a private redis-server (unix socket, no persistence):
// 1. hot refused keys: RedisRateLimiter with its default local tier (the refusal cache) against
//    the same limiter with `localTier: false` (every call runs the script), both clients;
// 2. leases (`lease: N`): forked processes, each with its own LocalTier, client and limiter,
//    hammering one GCRA key, with every admission's time: calls/s, script calls per admission and
//    the worst-window excess over the limit, beside the bound the design states.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { perHour, RedisRateLimiter } from 'sluice';
import { fmt, median } from './lib/measure.js';
import { callRate, clients as baseClients, keys, KEYS, redisServerFound, startRedisServer } from './lib/redis-server.js';

/** The issue's target: cached refusals at least this many times the direct script's calls/s. */
const TARGET = 20;

/** The row of a stand-in that answers a settled, constant refusal: no limiter answers faster. */
const CEILING = 'ceiling: a settled constant';
const REFUSED = Object.freeze({ allowed: false, remaining: 0, retryAfterMs: 1, resetAfterMs: 1, reason: 'limited' });

/** Script calls the server has run (EVALSHA and EVAL), from INFO commandstats. */
async function scriptCalls(admin) {
  const info = await admin.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) n += Number(m[2]);
  return n;
}

/**
 * Decisions in one script call's arguments (sha or script, numkeys, KEYS, ARGV): the limiters
 * here have one limit and no global cap, so each decision sends exactly one key.
 */
const decisionsIn = (args) => Number(args[1]);

// Each client wrapped so that the decisions it sends to Redis are counted (sluice duck-types the
// client: ioredis's `call`, node-redis's `sendCommand`).
const clients = {
  ioredis: {
    ...baseClients.ioredis,
    counted: (c, n) => ({
      call(command, ...args) {
        if (command === 'EVALSHA' || command === 'EVAL') n.decisions += decisionsIn(args);
        return c.call(command, ...args);
      },
    }),
  },
  'node-redis': {
    ...baseClients['node-redis'],
    counted: (c, n) => ({
      sendCommand(args) {
        if (args[0] === 'EVALSHA' || args[0] === 'EVAL') n.decisions += decisionsIn(args.slice(1));
        return c.sendCommand(args);
      },
    }),
  },
};

/** Part 1: hot refused keys, the refusal cache against the script, one client. */
async function refusalCache(server, admin, clientName, ms, rounds) {
  const client = clients[clientName];
  const raw = await client.open(server.socket);
  const n = { decisions: 0 };
  const redis = client.counted(raw, n);
  const prefix = `rt:refused:${clientName}:`;
  const limit = perHour(1); // burst 1: one call spends a key for the hour
  const contestants = {
    'local tier (default)': new RedisRateLimiter({ redis, limit, prefix }),
    'localTier: false': new RedisRateLimiter({ redis, limit, prefix, localTier: false }),
    // The harness's own ceiling: what any limiter answering from memory could at most reach here.
    [CEILING]: { tryAcquire: () => Promise.resolve(REFUSED) },
  };
  // Spend every key once, then one refused call per key through the tier (it learns the refusal).
  const spent = await Promise.all(keys.map((k) => contestants['localTier: false'].allow(k)));
  if (!spent.every(Boolean)) throw new Error('redis-tier: a fresh key was refused');
  const learnt = await Promise.all(keys.map((k) => contestants['local tier (default)'].allow(k)));
  if (learnt.some(Boolean)) throw new Error('redis-tier: a spent key was admitted');
  const rows = [];
  try {
    for (const inFlight of [1, 64]) {
      const res = {};
      for (let r = 0; r < rounds; r++) {
        for (const [name, limiter] of Object.entries(contestants)) {
          const d0 = n.decisions;
          const s0 = await scriptCalls(admin);
          const got = await callRate(async (k) => (await limiter.tryAcquire(k)).allowed, inFlight, ms);
          got.scripts = (await scriptCalls(admin)) - s0;
          got.decisions = n.decisions - d0;
          (res[name] ??= []).push(got);
        }
      }
      const sum = (list, f) => list.reduce((a, x) => a + x[f], 0);
      const base = median(res['localTier: false'].map((x) => x.perSec));
      for (const [name, list] of Object.entries(res)) {
        const perSec = median(list.map((x) => x.perSec));
        const calls = sum(list, 'calls');
        rows.push({
          clientName, inFlight, name, perSec, all: list.map((x) => x.perSec), calls, allowed: sum(list, 'allowed'),
          scripts: sum(list, 'scripts'), decisions: sum(list, 'decisions'), vs: perSec / base,
        });
      }
    }
  } finally {
    await client.close(raw);
  }
  return rows;
}

// Part 2: leases. The limit every process shares: r = 2 permits per ms, burst b = 100.
const LIMIT = { permits: 2_000, periodMs: 1_000, burst: 100 };
const PROCESSES = 4;
const LANES = 4;
const LEASE_MS = 1_000;
const COST = 1;
/** The most the Redis GCRA admits in any closed window of `w` ms: b + floor(w * r) (see the text). */
const ceiling = (w) => LIMIT.burst + Math.floor((w * LIMIT.permits) / LIMIT.periodMs);
const abs = () => performance.timeOrigin + performance.now();

/** The largest number of `times` (sorted) in any window [t, t + w] that starts at one of them. */
function mostInWindow(times, w) {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (j < times.length && times[j] - times[i] <= w) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

function forkChild() {
  const child = fork(fileURLToPath(new URL('./lib/redis-tier-child.js', import.meta.url)), [], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = [];
  child.on('message', (msg) => {
    const w = waiting.shift();
    if (w === undefined) return;
    if (msg.type === 'error') w.reject(new Error(`redis-tier child: ${msg.message}`));
    else w.resolve(msg);
  });
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`redis-tier child exited (${code})`));
  });
  const next = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  return {
    up: next(),
    ask(msg) {
      const reply = next();
      child.send(msg);
      return reply;
    },
    async exit() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      if (child.connected) child.send({ type: 'exit' });
      else child.kill('SIGKILL');
      await Promise.race([gone, sleep(2_000).then(() => child.kill('SIGKILL'))]);
    },
  };
}

let runs = 0;

/** One lease run on every child; the admissions merged on the common timeline. */
async function leaseRun(children, socket, admin, cfg) {
  const key = 'hot:key';
  const prefix = `rt:lease:${++runs}:`;
  const prepared = await Promise.all(children.map((ch, index) => ch.ask({ type: 'prepare', cfg: { ...cfg, socket, key, prefix, index, limit: LIMIT, leaseMs: LEASE_MS, lanes: LANES } })));
  const s0 = await scriptCalls(admin);
  const done = await Promise.all(children.map((ch) => ch.ask({ type: 'go', startAt: abs() + 50 })));
  const scripts = (await scriptCalls(admin)) - s0;
  const times = Float64Array.from(done.flatMap((d) => Array.from(d.times))).sort();
  const calls = done.reduce((a, d) => a + d.calls, 0);
  const spanMs = Math.max(...done.map((d) => d.spanMs));
  const offsets = prepared.map((p) => p.abs - p.mono);
  const runMs = times.length > 1 ? times[times.length - 1] - times[0] : 0;
  const lagMs = Math.max(...done.map((d) => d.lagMs));
  const windows = [100, 1_000, runMs].map((w) => {
    const most = w === runMs ? times.length : mostInWindow(times, w);
    // Redis counted these admissions up to lagMs before they returned: over w + lagMs of its clock.
    return { w, most, ceiling: ceiling(w), excess: most - ceiling(w), allowance: ceiling(w + lagMs) - ceiling(w) };
  });
  return {
    ...cfg, calls, perSec: calls / (spanMs / 1000), admitted: times.length, scripts, windows, runMs, lagMs,
    bound: cfg.lease > 0 ? PROCESSES * (cfg.lease + COST) : 0,
    degraded: done.reduce((a, d) => a + d.degraded, 0),
    lateSpends: done.reduce((a, d) => a + d.lateSpends, 0),
    skewUs: (Math.max(...offsets) - Math.min(...offsets)) * 1000,
  };
}

export async function runRedisTier({ quick = false } = {}) {
  if (!redisServerFound('Redis tier')) {
    return { markdown: '## Redis local tier\n\nSkipped: no redis-server on PATH.' };
  }
  const ms = quick ? 200 : 1_000;
  const rounds = quick ? 1 : 3;
  const hammerMs = quick ? 300 : 2_000;
  const lateMs = quick ? 150 : 500;
  const late = { schedule: 'late', staggerMs: 60, hammerAtMs: 300, durationMs: lateMs };
  const server = await startRedisServer();
  const admin = new Redis({ path: server.socket });
  const children = [];
  const cacheRows = [];
  const leaseRows = [];
  try {
    for (const clientName of Object.keys(clients)) cacheRows.push(...(await refusalCache(server, admin, clientName, ms, rounds)));
    for (let i = 0; i < PROCESSES; i++) children.push(forkChild());
    await Promise.all(children.map((c) => c.up));
    for (const cfg of [
      { name: 'no tier (`localTier: false`)', tier: false, lease: 0 },
      { name: 'refusal cache, no lease', tier: true, lease: 0 },
      { name: 'lease: 16', tier: true, lease: 16 },
      { name: 'lease: 100', tier: true, lease: 100 },
    ]) leaseRows.push(await leaseRun(children, server.socket, admin, { ...cfg, scenario: 'hammer', schedule: 'hammer', durationMs: hammerMs }));
    for (const cfg of [
      { name: 'refusal cache, no lease', tier: true, lease: 0 },
      { name: 'lease: 16', tier: true, lease: 16 },
      { name: 'lease: 100', tier: true, lease: 100 },
    ]) leaseRows.push(await leaseRun(children, server.socket, admin, { ...cfg, scenario: 'late', ...late }));
  } finally {
    await Promise.all(children.map((c) => c.exit()));
    admin.disconnect();
    await server.stop();
  }

  const lines = ['## Redis local tier: the refusal cache and leases', ''];
  lines.push(`A private redis-server ${server.version} on a unix socket (no persistence).`, '');
  lines.push('### Hot refused keys: the refusal cache against the script', '');
  lines.push(`${fmt(KEYS)} keys of 24 characters walked in turn, every one refused: \`perHour(1)\` (burst 1), each key spent once first, then ` +
    'asked once through the tier so that it holds the refusal. `RedisRateLimiter.tryAcquire` with its default local tier against the same limiter ' +
    '(same prefix, same Redis keys) with `localTier: false`, whose every call runs the script (up to 32 decisions a call). ' +
    `Calls/s over ${ms / 1000} s, ${rounds === 1 ? 'one round' : `median of ${rounds} alternating rounds`}; "in flight": calls outstanding at once from one thread. ` +
    '"allowed", "script calls" (INFO commandstats, EVALSHA and EVAL) and "to Redis" (decisions in the script calls, counted by wrapping the client) ' +
    'are totals over the rounds; "without Redis" is the share of calls whose decision was never sent. ' +
    `"${CEILING}" is no limiter: \`tryAcquire\` returns \`Promise.resolve\` of one frozen refusal, the most this harness (the caller's ` +
    '`await` and a clock read per call) lets any answer from memory reach.', '');
  lines.push('| client | in flight | limiter | calls/s (median) | all rounds | calls | allowed | script calls | to Redis | without Redis | vs `localTier: false` |',
    '|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|');
  for (const r of cacheRows) {
    lines.push(`| ${r.clientName} | ${r.inFlight} | ${r.name} | ${fmt(Math.round(r.perSec))} | ${r.all.map((x) => `${fmt(x / 1000, 1)}k`).join(', ')} | ` +
      `${fmt(r.calls)} | ${fmt(r.allowed)} | ${fmt(r.scripts)} | ${fmt(r.decisions)} | ${fmt((1 - r.decisions / r.calls) * 100, 2)}% | ${fmt(r.vs, 1)}x |`);
  }
  const ratio = (client, inFlight) => cacheRows.find((r) => r.clientName === client && r.inFlight === inFlight && r.name.startsWith('local tier'))?.vs ?? NaN;
  const cachedOk = cacheRows.filter((r) => r.name.startsWith('local tier')).every((r) => r.allowed === 0);
  lines.push('', `| target | ioredis | node-redis | met |`, '|---|---:|---:|---|');
  for (const inFlight of [1, 64]) {
    const got = [ratio('ioredis', inFlight), ratio('node-redis', inFlight)];
    lines.push(`| ${inFlight === 1 ? 'one call at a time' : `${inFlight} in flight`}: at least ${TARGET}x the script | ${fmt(got[0], 1)}x | ${fmt(got[1], 1)}x | ${got.every((x) => x >= TARGET) ? 'yes' : '**missed**'} |`);
  }
  for (const inFlight of [1, 64]) {
    const ceiling = (client) => cacheRows.find((r) => r.clientName === client && r.inFlight === inFlight && r.name === CEILING)?.vs ?? NaN;
    lines.push(`| (${inFlight === 1 ? 'one call at a time' : `${inFlight} in flight`}: the harness's ceiling) | ${fmt(ceiling('ioredis'), 1)}x | ${fmt(ceiling('node-redis'), 1)}x | |`);
  }
  lines.push(`| every cached call refused | ${cachedOk ? 'allowed 0' : '**some allowed**'} | | ${cachedOk ? 'yes' : '**no**'} |`);

  lines.push('', '### Leases: the worst-window excess over a shared limit', '');
  const r = LIMIT.permits / LIMIT.periodMs;
  lines.push(`${PROCESSES} forked processes, each with its own ioredis client, \`LocalTier.create({ leaseMs: ${fmt(LEASE_MS)} })\` and RedisRateLimiter, ` +
    `call \`tryAcquire\` on one key (${LANES} calls in flight each, a turn of the event loop every 64 calls) under the GCRA limit ` +
    `\`{ permits: ${fmt(LIMIT.permits)}, periodMs: ${fmt(LIMIT.periodMs)}, burst: ${LIMIT.burst} }\` (r = ${fmt(r)} per ms, b = ${LIMIT.burst}), ` +
    'which they saturate. Each admission is timed on return (performance.timeOrigin + performance.now() in its process; ' +
    `the processes' timelines agreed with CLOCK_MONOTONIC to within ${fmt(Math.max(...leaseRows.map((x) => x.skewUs)), 1)} µs). ` +
    '"hammer": every process calls from the start for ' + `${hammerMs / 1000} s` + '. "late": the worst case leases allow, staged: the processes ' +
    `make one call each, ${late.staggerMs} ms apart (the burst refills in between, so each takes a full lease), all stay idle until ${late.hammerAtMs} ms ` +
    `(the burst refills again; every lease still has ${fmt(LEASE_MS - late.hammerAtMs)} ms or more to run), then all call for ${late.durationMs} ms.`, '');
  lines.push('The ceiling for a window of w ms is b + floor(w x r): from any state, Redis\'s GCRA admits at most that in a closed window of w ms ' +
    'of its clock (each admission adds T = 1/r to a debt that falls at 1 per ms and may not pass b x T). "excess" is the most admissions in any window ' +
    'of w ms that starts at an admission, minus that ceiling (negative: below it); "run" is the window from the first admission to the last. ' +
    `"bound" is the design's, processes x (N + cost) = ${PROCESSES} x (N + ${COST}), 0 without leases: a refill starts only when the lease cannot serve ` +
    'the request at hand (redis-core.ts), so at any moment a process holds the rest of one lease or has one refill in flight, not both (no refill ' +
    'stalled here past `refillTimeoutMs`), and each lease permit is admitted less than leaseMs after Redis counted it. "+ lag": admissions are timed ' +
    'when they return, and Redis counted each one between its call and its return, so even an exact limiter can show ' +
    'floor((w + L) x r) - floor(w x r) more in a window, L being the longest call an admission took in the run (given in ms); "met": every window\'s ' +
    'excess is at most the bound plus that. "script calls" from INFO commandstats; "late spends": takes that found their lease expired after the ' +
    'compare-and-swap (not admitted).', '');
  lines.push('| run | limiter | calls/s | admitted | script calls / admission | excess, 100 ms | excess, 1 s | excess, run | bound | + lag (L) | met | late spends |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|');
  for (const x of leaseRows) {
    const cell = (w) => `${fmt(w.excess)} (${fmt(w.most)} of ${fmt(w.ceiling)})`;
    const met = x.windows.every((w) => w.excess <= x.bound + w.allowance) ? 'yes' : '**no**';
    const lag = Math.max(...x.windows.map((w) => w.allowance));
    lines.push(`| ${x.scenario} | ${x.name} | ${fmt(Math.round(x.perSec))} | ${fmt(x.admitted)} | ${fmt(x.scripts / x.admitted, 2)} | ` +
      `${cell(x.windows[0])} | ${cell(x.windows[1])} | ${cell(x.windows[2])}, ${fmt(x.runMs)} ms | ${fmt(x.bound)} | ${lag} (${fmt(x.lagMs, 1)}) | ${met} | ${fmt(x.lateSpends)} |`);
    if (x.degraded > 0) throw new Error(`redis-tier: ${x.degraded} degraded answers in the ${x.scenario} run of ${x.name}`);
  }
  return { markdown: lines.join('\n') };
}
