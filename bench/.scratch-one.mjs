import { RateLimiterRedis } from 'rate-limiter-flexible';
import { perSecond, RedisRateLimiter } from 'sluice';
import { callRate, clients, startRedisServer } from './lib/redis-server.js';
const server = await startRedisServer();
const c = await clients.ioredis.open(server.socket);
const sluice = new RedisRateLimiter({ redis: c, limit: perSecond(1_000_000), prefix: 'bs:' });
const flexible = new RateLimiterRedis({ storeClient: c, points: 1_000_000, duration: 1, keyPrefix: 'bf' });
const con = { sluice: (k) => sluice.allow(k), rlf: (k) => flexible.consume(k).then(() => true, () => false) };
const res = { sluice: [], rlf: [] };
for (let r = 0; r < 4; r++) for (const [n, f] of Object.entries(con)) { await c.call('CONFIG', 'RESETSTAT'); const x = await callRate(f, 1, 1500); const st = await c.call('INFO', 'commandstats'); res[n].push(Math.round(x.perSec)); if (r === 3) console.log(n, st.split('\n').filter((l) => /evalsha|eval:|incr|pexpire|set:|multi|exec/.test(l)).join(' | ')); }
console.log(res);
await clients.ioredis.close(c); await server.stop();
