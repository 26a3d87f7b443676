// How the cost of one check grows with the number of keys and with key length (one thread,
// existing keys, mostly allowed), beside the Map GCRA ceiling on the same keys.
import { perSecond, RateLimiter } from 'sluice';
import { createMapGcra } from './lib/map-gcra.js';
import { BATCH, bytesPerCall, fmt, makeKeys, nsPerCall } from './lib/measure.js';
import { keyStream } from './lib/streams.js';

const LIMIT = perSecond(5e7, { burst: 5e7 });

async function measure(keys, opts, cacheSize, slotsPerKey) {
  const limiter = new RateLimiter({
    limit: LIMIT, maxKeys: Math.max(16, keys.length), maxKeyBytes: Math.max(64, keys[0].length),
    ...(cacheSize === undefined ? {} : { cacheSize }), ...(slotsPerKey === undefined ? {} : { slotsPerKey }),
  });
  const map = createMapGcra(LIMIT);
  for (const k of keys) { limiter.allow(k); map.allow(k); }
  // A stream at least twice as long as the key set (so that every key is drawn, evenly), at least 2^16.
  const length = 2 ** Math.max(16, Math.ceil(Math.log2(2 * keys.length)));
  const mask = length - 1;
  const stream = keyStream('uniform', keys.length, length, { seed: 7 });
  let j = 0;
  const batch = (fn) => () => { for (let i = 0; i < BATCH; i++) fn(keys[stream[(j++) & mask]]); };
  const res = await nsPerCall({ sluice: batch((k) => limiter.allow(k)), map: batch((k) => map.allow(k)) }, opts);
  const bytes = await bytesPerCall((i) => limiter.allow(keys[stream[i & mask]]));
  return { sluice: res.sluice.median, map: res.map.median, bytes, tableBytes: limiter.stats().tableBytes };
}

export async function runScaling({ quick = false } = {}) {
  const opts = quick ? { timeMs: 150, warmupMs: 50 } : { timeMs: 800, warmupMs: 200 };
  const counts = quick ? [1_000, 10_000] : [1_000, 10_000, 100_000, 1_000_000];
  const byCount = [];
  for (const n of counts) byCount.push({ n, ...(await measure(makeKeys(n, 's'), opts)) });
  const big = counts[counts.length - 1];
  const bigCached = await measure(makeKeys(big, 's'), opts, Math.min(2 ** 24, big));
  const bigDense = await measure(makeKeys(big, 's'), opts, undefined, 1.25);
  const byLength = [];
  for (const len of [8, 24, 64]) {
    const keys = Array.from({ length: 1_000 }, (_, i) => `${i}:`.padEnd(len, 'x').slice(0, len));
    byLength.push({ len, ...(await measure(keys, opts)) });
  }
  const lines = ['## Scaling: keys and key length (one thread, existing keys, uniform)', ''];
  lines.push('ns per check (median), each row drawing evenly from all its keys (a stream twice as long as the key set). The per-thread key cache holds 65,536 entries by default: ' +
    'beyond that, checks miss it and hash the key in JavaScript, and once more than a quarter of the lookups miss it, it turns itself off.', '');
  lines.push('| keys | sluice allow | Map GCRA | sluice / Map | bytes/check | table bytes per key |', '|---:|---:|---:|---:|---:|---:|');
  for (const r of byCount) lines.push(`| ${fmt(r.n)} | ${fmt(r.sluice, 1)} | ${fmt(r.map, 1)} | ${fmt(r.sluice / r.map, 2)}x | ${fmt(r.bytes, 1)} | ${fmt(r.tableBytes / r.n, 1)} |`);
  lines.push(`| ${fmt(big)} (cacheSize ${fmt(big)}) | ${fmt(bigCached.sluice, 1)} | ${fmt(bigCached.map, 1)} | ${fmt(bigCached.sluice / bigCached.map, 2)}x | ${fmt(bigCached.bytes, 1)} | ${fmt(bigCached.tableBytes / big, 1)} |`);
  lines.push(`| ${fmt(big)} (slotsPerKey 1.25) | ${fmt(bigDense.sluice, 1)} | ${fmt(bigDense.map, 1)} | ${fmt(bigDense.sluice / bigDense.map, 2)}x | ${fmt(bigDense.bytes, 1)} | ${fmt(bigDense.tableBytes / big, 1)} |`);
  lines.push('', '| key length (chars, 1k keys) | sluice allow | Map GCRA | sluice / Map |', '|---:|---:|---:|---:|');
  for (const r of byLength) lines.push(`| ${r.len} | ${fmt(r.sluice, 1)} | ${fmt(r.map, 1)} | ${fmt(r.sluice / r.map, 2)}x |`);
  lines.push('', 'Scaling with the number of workers is in the contention lab above.');
  return { markdown: lines.join('\n'), figures: { byCount, bigCached, bigDense, byLength } };
}
