// The Redis outage suite: RedisRateLimiter while its private redis-server is frozen (SIGSTOP, then
// SIGCONT), for each onError and both clients: decision latency before and during the outage, how
// soon the first answer without Redis and the open breaker come, and how soon Redis answers again.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { perSecond, RedisRateLimiter } from 'sluice';
import { fmt, median, percentile } from './lib/measure.js';
import { keys, KEYS, redisServerFound, startRedisServer } from './lib/redis-server.js';

/** Calls made per second, whatever the answers. */
const RATE = 20_000;
const TIMEOUT_MS = 100;

// As the test suite builds them: ioredis retries every command until it is answered, node-redis
// reconnects after 50 ms; both keep their offline queue. The limiter's deadlines bound the waits.
const clients = {
  ioredis: {
    async open(socket) {
      const c = new Redis({ path: socket, maxRetriesPerRequest: null });
      c.on('error', () => {});
      await new Promise((r) => c.once('ready', r));
      return c;
    },
    close: (c) => c.disconnect(),
  },
  'node-redis': {
    async open(socket) {
      const c = createClient({ socket: { path: socket, reconnectStrategy: () => 50 } });
      c.on('error', () => {});
      await c.connect();
      return c;
    },
    close: (c) => c.disconnect().catch(() => {}),
  },
};

/**
 * One outage: calls arrive at a steady RATE (each made on the next key without waiting for the
 * others' answers, in 1 ms ticks) for `normalMs`; the server is frozen (`kind` 'freeze': SIGSTOP,
 * then SIGCONT) or killed and started again empty ('restart') for `outageMs`; the calls go on
 * until Redis answers again, then `afterMs` more. Latency is performance.now() around each call,
 * from the moment it is made. After a restart the client reconnects: "Redis again" is then
 * measured from its `ready` event, when it can send again.
 */
async function outage(server, clientName, onError, kind, { normalMs, outageMs, afterMs }) {
  const c = await clients[clientName].open(server.socket);
  const limiter = new RedisRateLimiter({ redis: c, limit: perSecond(1_000_000), prefix: `out:${clientName}:${onError}:${Math.random()}:`, timeoutMs: TIMEOUT_MS, onError });
  await limiter.tryAcquire('warm', 0); // reads Redis's clock
  const t0s = [];
  const t1s = [];
  const degraded = [];
  /** Whether the breaker was open when each call was made. */
  const openAtCall = [];
  let running = true;
  let tStop = Infinity;
  let tCont = Infinity;
  let firstOpen = Infinity;
  let openMs = 0;
  let lastPoll = performance.now();
  const poll = setInterval(() => {
    const now = performance.now();
    if (limiter.breakerOpen && now >= tStop) {
      firstOpen = Math.min(firstOpen, now);
      if (now <= tCont) openMs += now - Math.max(lastPoll, tStop);
    }
    lastPoll = now;
  }, 1);
  const pending = new Set();
  async function drive() {
    const start = performance.now();
    let issued = 0;
    while (running) {
      const due = Math.floor(((performance.now() - start) * RATE) / 1000);
      for (; issued < due; issued++) {
        const t0 = performance.now();
        const openThen = limiter.breakerOpen;
        const p = limiter.tryAcquire(keys[issued % KEYS]).then((d) => {
          const t1 = performance.now();
          t0s.push(t0);
          t1s.push(t1);
          degraded.push(d.degraded === true);
          openAtCall.push(openThen);
          if (d.degraded && t1 >= tStop && limiter.breakerOpen) firstOpen = Math.min(firstOpen, t1);
          pending.delete(p);
        });
        pending.add(p);
      }
      await sleep(1);
    }
    await Promise.all(pending);
  }
  const tStart = performance.now();
  const driving = drive();
  await sleep(normalMs);
  tStop = performance.now();
  let readyAt = Infinity;
  if (kind === 'freeze') {
    server.freeze();
  } else {
    await server.kill();
    c.once('ready', () => { readyAt = performance.now(); });
  }
  await sleep(outageMs);
  tCont = performance.now();
  if (kind === 'freeze') server.thaw();
  else await server.restart();
  const backBy = tCont + 5_000;
  let seen = 0;
  let back = false;
  while (!back && performance.now() < backBy) {
    await sleep(5);
    for (; seen < t1s.length && !back; seen++) back = t1s[seen] > tCont && !degraded[seen];
  }
  // Redis again, from when the client could send again: the thaw, or its ready event.
  const from = kind === 'freeze' ? tCont : readyAt;
  await sleep(afterMs);
  running = false;
  await driving;
  clearInterval(poll);
  await clients[clientName].close(c);

  const latencies = (from, to) => t0s.flatMap((t, i) => (t >= from && t < to ? [t1s[i] - t] : []));
  // Past the first calls' warm-up, and answered (or given up on) before the freeze.
  const normal = latencies(tStart + 20, tStop - TIMEOUT_MS);
  const during = latencies(tStop, tCont);
  // The calls made during the outage while the breaker was open: every one but a probe answers at once.
  const whileOpen = t0s.flatMap((t, i) => (t >= tStop && t < tCont && openAtCall[i] ? [t1s[i] - t] : []));
  const inOutage = t0s.flatMap((t, i) => (t >= tStop && t < tCont ? [degraded[i]] : []));
  return {
    normalP50: percentile(normal, 0.5),
    normalP99: percentile(normal, 0.99),
    outageP50: percentile(during, 0.5),
    outageP99: percentile(during, 0.99),
    openP99: percentile(whileOpen, 0.99),
    firstDegraded: minOf(t1s, (t, i) => degraded[i] && t >= tStop) - tStop,
    breakerOpen: firstOpen - tStop,
    openShare: openMs / (tCont - tStop),
    recovered: minOf(t1s, (t, i) => !degraded[i] && t > tCont) - from,
    outageCalls: inOutage.length,
    outageDegraded: inOutage.filter(Boolean).length / inOutage.length,
  };
}

/** The smallest of `values` that `keep` keeps (Infinity: none). */
function minOf(values, keep) {
  let m = Infinity;
  for (let i = 0; i < values.length; i++) if (values[i] < m && keep(values[i], i)) m = values[i];
  return m;
}

/** ms: three decimals below 1 ms (the answers without Redis take microseconds), else one. */
const ms = (x) => (Number.isFinite(x) ? fmt(x, x < 1 ? 3 : 1) : String(x));

export async function runRedisOutage({ quick = false } = {}) {
  if (!redisServerFound('Redis outage')) {
    return { markdown: '## Redis outage\n\nSkipped: no redis-server on PATH.' };
  }
  const phases = quick ? { normalMs: 250, outageMs: 300, afterMs: 100 } : { normalMs: 1_000, outageMs: 1_000, afterMs: 300 };
  const rounds = quick ? 1 : 3;
  const server = await startRedisServer();
  const rows = [];
  try {
    for (const kind of ['freeze', 'restart']) {
      for (const clientName of Object.keys(clients)) {
        // Every onError for a freeze; a restart's figures do not depend on it (deny only).
        for (const onError of kind === 'freeze' ? ['deny', 'allow', 'local'] : ['deny']) {
          const runs = [];
          for (let r = 0; r < rounds; r++) runs.push(await outage(server, clientName, onError, kind, phases));
          const med = (f) => median(runs.map((x) => x[f]));
          rows.push({
            kind, clientName, onError,
            ...Object.fromEntries(Object.keys(runs[0]).map((f) => [f, med(f)])),
            recoveredAll: runs.map((x) => x.recovered),
          });
        }
      }
    }
  } finally {
    await server.stop();
  }

  const lines = ['## Redis outage: RedisRateLimiter while the server is frozen, or killed and restarted', ''];
  lines.push(`A private redis-server ${server.version} on a unix socket; calls arrive at ${fmt(RATE)} a second from one thread (each made without waiting for the others' answers) over ${fmt(KEYS)} keys ` +
    `(a limit nobody reaches), \`timeoutMs: ${TIMEOUT_MS}\`. ${phases.normalMs / 1000} s of normal operation, then the server is frozen (SIGSTOP) ` +
    `for ${phases.outageMs / 1000} s and thawed (SIGCONT), or killed (SIGKILL) and started again, empty, after as long; the calls go on throughout. ` +
    `${rounds === 1 ? 'One round' : `Median of ${rounds} rounds`} per row; ` +
    'latencies are performance.now() around each call, in ms; "normal" the calls made before the freeze (up to `timeoutMs` before it), "outage" those made while frozen. ' +
    '"while open p99": the calls made during the outage while the breaker was open (every one but a probe answers without Redis). ' +
    '"first degraded" and "breaker open" are measured from the SIGSTOP or SIGKILL (the breaker polled every ms), "Redis again" from the SIGCONT, ' +
    'or after a restart from the client\'s `ready` event (its connection made again), to the first answer Redis decided (it includes what is left ' +
    'of the breaker\'s cooldown); "open" is the share of the outage the breaker was seen open; ' +
    '"by onError" the share of the calls made during the outage that onError answered.', '');
  lines.push('| outage | client | onError | normal p50 | normal p99 | outage p50 | outage p99 | while open p99 | first degraded | breaker open | open | ' +
    'Redis again | calls in outage | by onError |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    lines.push(`| ${r.kind === 'freeze' ? 'SIGSTOP' : 'SIGKILL, restart'} | ${r.clientName} | ${r.onError} | ${ms(r.normalP50)} | ${ms(r.normalP99)} | ` +
      `${ms(r.outageP50)} | ${ms(r.outageP99)} | ${ms(r.openP99)} | ${ms(r.firstDegraded)} | ${ms(r.breakerOpen)} | ${fmt(r.openShare * 100, 0)}% | ` +
      `${ms(r.recovered)}${rounds > 1 ? ` (${r.recoveredAll.map(ms).join(', ')})` : ''} | ${fmt(r.outageCalls)} | ${fmt(r.outageDegraded * 100, 1)}% |`);
  }
  return { markdown: lines.join('\n') };
}
