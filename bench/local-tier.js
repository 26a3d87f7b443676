// The local tier's hot paths, in ns per call on one thread: `node bench/local-tier.js` after
// `npm run build` (not part of `npm run bench`). refusedFor on a refused key (the hit the cache
// exists for), on a cached key that is no longer refused, and on keys the tier has never seen (a
// miss: the key is encoded, hashed and probed each time); allRefusedFor; and take on a lease.
import { LocalTier } from '../dist/redis/local-tier.js';
import { BATCH, fmt, makeKeys, nsPerCall } from './lib/measure.js';

const tier = LocalTier.create({ maxKeys: 10_000, leaseMs: 3_600_000 });
const refused = makeKeys(64, 'r');
const expired = makeKeys(64, 'e');
const unknown = makeKeys(4096, 'u');
const now = performance.now();
for (const k of refused) tier.refuseUntil(k, now + 600_000);
for (const k of expired) tier.refuseUntil(k, now + 1);
tier.refuseAllUntil(now + 600_000);
tier.offer('lease', 0xffffe, now);
const later = now + 10; // every `expired` refusal is over at this reading

let i = 0;
let sink = 0;
const tasks = {
  'refusedFor, hit (refused)': () => { for (let n = 0; n < BATCH; n++) sink += tier.refusedFor(refused[i++ & 63], later); },
  'refusedFor, hit (not refused)': () => { for (let n = 0; n < BATCH; n++) sink += tier.refusedFor(expired[i++ & 63], later); },
  'refusedFor, miss (unknown key)': () => { for (let n = 0; n < BATCH; n++) sink += tier.refusedFor(unknown[i++ & 4095], later); },
  'allRefusedFor': () => { for (let n = 0; n < BATCH; n++) sink += tier.allRefusedFor(later); },
  // A new lease whenever one runs dry (every ~1M takes): nearly every call spends a permit.
  'take (lease, nowMs given)': () => {
    for (let n = 0; n < BATCH; n++) if (tier.take('lease', 1, later)) sink++; else tier.offer('lease', 0xffffe, performance.now());
  },
};
const results = await nsPerCall(tasks, { timeMs: 1_000, warmupMs: 300 });
for (const [name, r] of Object.entries(results)) console.log(`${name.padEnd(32)} ${fmt(r.median)} ns  (p25 ${fmt(r.p25)}, p75 ${fmt(r.p75)})`);
if (sink === 0.5) console.log(''); // keep the results alive
