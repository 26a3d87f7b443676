// The HTTP-on-Redis suite: a real Express 5 or Fastify 5 app limited through Redis, driven over
// HTTP by autocannon, sluice against the library its users would otherwise reach for
// (rate-limiter-flexible's RateLimiterRedis behind Express, @fastify/rate-limit's Redis store
// behind Fastify), same run. Every contestant runs a fixed window of 1 request per key per hour
// with no lease, on one private redis-server. Each app runs in a process of its own
// (bench/lib/http-redis-app.js), so the load generator does not share its event loop.
import { fork } from 'node:child_process';
import autocannon from 'autocannon';
import { fmt, median } from './lib/measure.js';
import { redisServerFound, startRedisServer } from './lib/redis-server.js';

const CONTESTANTS = {
  express: ['sluice', 'sluice, no local tier', 'rate-limiter-flexible RateLimiterRedis'],
  fastify: ['sluice', 'sluice, no local tier', '@fastify/rate-limit (Redis store)'],
};
/** Keys refused throughout: spent once before the run (1 per hour). */
const SPENT = 1_000;
const CONNECTIONS = 16;

/** Starts one app; resolves with its port and a stop function. */
async function startApp(framework, contestant, socket) {
  const child = fork(new URL('./lib/http-redis-app.js', import.meta.url), [framework, contestant, socket], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise((resolve, reject) => {
    child.once('message', (m) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`the ${framework} app (${contestant}) exited with ${code}`)));
  });
  return {
    port,
    stop: () => new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGKILL'); }),
  };
}

/**
 * One run against `port`: `refusedShare` of the requests (0 or 0.5) go to keys spent before the
 * run, the others each to a key never seen before (admitted). Resolves with requests/s and the
 * share answered 429.
 */
async function load(port, refusedShare, seconds, tag) {
  const url = `http://127.0.0.1:${port}/`;
  if (refusedShare > 0) {
    for (let i = 0; i < SPENT; i++) await fetch(url, { headers: { 'x-key': `spent:${i}` } }).then((r) => r.arrayBuffer());
  }
  let n = 0;
  const run = (duration) => autocannon({
    url, connections: CONNECTIONS, duration,
    requests: [{
      setupRequest(req) {
        n++;
        const key = refusedShare > 0 && n % 2 === 0 ? `spent:${n % SPENT}` : `new:${tag}:${n}`;
        return { ...req, headers: { ...req.headers, 'x-key': key } };
      },
    }],
  });
  // A first second, not counted: the app's code is compiled and its connections made.
  await run(1);
  const result = await run(seconds);
  const total = result['2xx'] + result.non2xx;
  if (result.errors > 0 || total === 0) throw new Error(`autocannon: ${result.errors} errors, ${total} answers`);
  return { rps: total / result.duration, refused: result.non2xx / total };
}

export async function runHttpRedis({ quick = false } = {}) {
  const lines = ['## HTTP on Redis: Express and Fastify apps against their usual Redis limiters', ''];
  if (!redisServerFound('http-redis')) {
    lines.push('*Skipped: no redis-server on PATH.*');
    return { markdown: lines.join('\n') };
  }
  const server = await startRedisServer();
  const rounds = quick ? 1 : 5;
  const seconds = quick ? 1 : 3;
  const rows = [];
  try {
    for (const framework of Object.keys(CONTESTANTS)) {
      for (const refusedShare of [0, 0.5]) {
        const names = CONTESTANTS[framework];
        const perRound = Object.fromEntries(names.map((c) => [c, []]));
        for (let r = 0; r < rounds; r++) {
          // Alternating order, so that a busy spell of the machine falls on every contestant alike.
          for (const c of r % 2 === 0 ? names : [...names].reverse()) {
            const app = await startApp(framework, c, server.socket);
            try {
              perRound[c].push(await load(app.port, refusedShare, seconds, `${framework}${refusedShare}${r}`));
            } finally {
              await app.stop();
            }
          }
        }
        const peer = names[names.length - 1];
        for (const c of names) {
          const rps = perRound[c].map((x) => x.rps);
          // Each round's ratio to the peer's, then their median: a busy round moves both.
          const ratio = median(rps.map((x, i) => x / perRound[peer][i].rps));
          rows.push({ framework, refusedShare, contestant: c, rps: median(rps), all: rps, refused: median(perRound[c].map((x) => x.refused)), ratio, peer });
        }
      }
    }
  } finally {
    await server.stop();
  }
  lines.push(
    `A private redis-server ${server.version} on a unix socket (no persistence); each app in its own process, one ioredis client, ` +
      `autocannon in this process with ${CONNECTIONS} connections for ${seconds} s after 1 s not counted, median of ${rounds} alternating rounds. ` +
      'Every contestant: a fixed window of 1 request per key per hour, no lease. "0% refused": every request on a key never seen before; ' +
      `"50% refused": every other request on one of ${fmt(SPENT)} keys spent before the run. sluice's local tier (its default) answers a key ` +
      'Redis refused from shared memory until the refusal ends; "no local tier" asks Redis every time.',
    '',
    '| app | refused | contestant | requests/s (median) | all rounds | 429s | vs peer |',
    '|---|---:|---|---:|---|---:|---:|',
  );
  for (const x of rows) {
    const all = x.all.map((v) => `${fmt(v / 1000, 1)}k`).join(', ');
    lines.push(`| ${x.framework} | ${x.refusedShare * 100}% | ${x.contestant} | ${fmt(x.rps)} | ${all} | ${(x.refused * 100).toFixed(1)}% | ${x.ratio.toFixed(2)}x |`);
  }
  lines.push('', '| target: at least parity with the peer | measured | met |', '|---|---:|---|');
  for (const x of rows.filter((r) => r.contestant !== r.peer)) {
    lines.push(`| ${x.framework}, ${x.refusedShare * 100}% refused, ${x.contestant} | ${x.ratio.toFixed(2)}x | ${x.ratio >= 1 ? 'yes' : '**missed**'} |`);
  }
  return { markdown: lines.join('\n') };
}
