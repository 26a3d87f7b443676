// The Redis suite: RedisRateLimiter against rate-limiter-flexible's RateLimiterRedis, both clients,
// one call at a time and 64 in flight, on a private redis-server (unix socket, no persistence).
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { perSecond, RedisRateLimiter } from 'sluice';
import { fmt, median } from './lib/measure.js';
import { callRate, clients, KEYS, redisServerFound, startRedisServer } from './lib/redis-server.js';


export async function runRedis({ quick = false } = {}) {
  if (!redisServerFound('Redis')) {
    return { markdown: '## Redis\n\nSkipped: no redis-server on PATH.' };
  }
  const server = await startRedisServer();
  const ms = quick ? 200 : 2000;
  const rounds = quick ? 1 : 3;
  const rows = [];
  try {
    for (const [clientName, client] of Object.entries(clients)) {
      const c = await client.open(server.socket);
      // A limit no key reaches here: every call is a full decision that is allowed.
      const sluice = new RedisRateLimiter({ redis: c, limit: perSecond(1_000_000), prefix: `bs:${clientName}:` });
      const flexible = new RateLimiterRedis({
        storeClient: c, points: 1_000_000, duration: 1, keyPrefix: `bf:${clientName}`, ...(clientName === 'node-redis' ? { useRedisPackage: true } : {}),
      });
      const contestants = {
        'sluice RedisRateLimiter': (k) => sluice.allow(k),
        'rate-limiter-flexible RateLimiterRedis': (k) => flexible.consume(k).then(() => true, () => false),
      };
      for (const inFlight of [1, 64]) {
        const res = {};
        for (let r = 0; r < rounds; r++) {
          for (const [name, decide] of Object.entries(contestants)) {
            const r = await callRate(decide, inFlight, ms);
            const got = { perSec: r.perSec, allowed: r.allowed / r.calls };
            (res[name] ??= []).push(got);
          }
        }
        const base = median(res['rate-limiter-flexible RateLimiterRedis'].map((x) => x.perSec));
        for (const [name, list] of Object.entries(res)) {
          const perSec = median(list.map((x) => x.perSec));
          rows.push({ clientName, inFlight, name, perSec, all: list.map((x) => x.perSec), allowed: median(list.map((x) => x.allowed)), vs: perSec / base });
        }
      }
      await client.close(c);
    }
  } finally {
    await server.stop();
  }

  const lines = ['## Redis: RedisRateLimiter against RateLimiterRedis', ''];
  lines.push(`A private redis-server ${server.version} on a unix socket (no persistence), ${fmt(KEYS)} keys of 24 characters walked in turn, ` +
    `limits nobody reaches (sluice \`perSecond(1,000,000)\`, GCRA in a Lua script on Redis's clock; RateLimiterRedis \`{ points: 1,000,000, duration: 1 }\`, ` +
    'a fixed-window counter). Calls/s over ' + `${ms / 1000} s, median of ${rounds} alternating rounds; "in flight": calls outstanding at once from one thread. ` +
    'sluice sends the decisions waiting together in script calls of up to 32, spread over up to four calls in flight.', '');
  lines.push('| client | in flight | contestant | calls/s (median) | all rounds | allowed | vs RateLimiterRedis |', '|---|---:|---|---:|---|---:|---:|');
  for (const r of rows) {
    lines.push(`| ${r.clientName} | ${r.inFlight} | ${r.name} | ${fmt(Math.round(r.perSec))} | ${r.all.map((x) => `${fmt(x / 1000, 1)}k`).join(', ')} | ${fmt(r.allowed * 100, 1)}% | ${fmt(r.vs, 2)}x |`);
  }
  const target = (client, inFlight) => rows.find((r) => r.clientName === client && r.inFlight === inFlight && r.name.startsWith('sluice'))?.vs ?? NaN;
  lines.push('', '| target | ioredis | node-redis | met |', '|---|---:|---:|---|');
  const one = [target('ioredis', 1), target('node-redis', 1)];
  const many = [target('ioredis', 64), target('node-redis', 64)];
  lines.push(`| one call at a time: at least parity | ${fmt(one[0], 2)}x | ${fmt(one[1], 2)}x | ${one.every((x) => x >= 1) ? 'yes' : '**missed**'} |`);
  lines.push(`| 64 in flight: at least 1.2x | ${fmt(many[0], 2)}x | ${fmt(many[1], 2)}x | ${many.every((x) => x >= 1.2) ? 'yes' : '**missed**'} |`);
  return { markdown: lines.join('\n') };
}
