// The core suite: tryAcquire on existing keys against the Map ceiling, bytes per check, two
// workers against one, and memory per tracked key. Returns a markdown section.
import { coarseClock, monotonicClock, perSecond, RateLimiter } from 'sluice';
import { gcraParams } from '../dist/math/gcra.js';
import { gcraSlotState } from '../dist/rate/gcra-slot.js';
import { SlotTable } from '../dist/table/table.js';
import { SLOTS_PER_KEY } from '../dist/table/layout.js';
import { createMapGcra, createMapGcraReadOnce } from './lib/map-gcra.js';
import { BATCH, bytesPerCall, fmt, makeKeys, median, nsPerCall } from './lib/measure.js';
import { workerThroughput } from './lib/throughput-run.js';

/** Where object-returning checks leave their Decision, so V8 cannot optimise the object away. */
export let sink;

async function singleThread(quick) {
  const keys = makeKeys(1_000);
  const limit = perSecond(1e6, { burst: 1e6 }); // existing keys, mostly allowed
  const sluice = new RateLimiter({ limit, maxKeys: 10_000 });
  const map = createMapGcra(limit);
  const mapOnce = createMapGcraReadOnce(limit);
  for (const k of keys) { sluice.allow(k); map.allow(k); mapOnce.allow(k); }
  let j = 0;
  const batch = (fn) => () => { for (let i = 0; i < BATCH; i++) fn(keys[(j++) % 1000]); };
  const res = await nsPerCall({
    'Map GCRA, tryAcquire (object)': batch((k) => { sink = map.tryAcquire(k); }),
    'sluice tryAcquire (object)': batch((k) => { sink = sluice.tryAcquire(k); }),
    'Map GCRA, allow (boolean)': batch((k) => map.allow(k)),
    'sluice allow (boolean)': batch((k) => sluice.allow(k)),
    'Map GCRA, allow, performance read once': batch((k) => mapOnce.allow(k)),
  }, quick ? { timeMs: 200, warmupMs: 50 } : {});
  // Afterwards (other clock shapes make the clock call polymorphic, which can only slow these
  // rows): the same limiter on coarseClock(), and the same table logic with a clock that returns
  // a constant, to separate what the table costs and allocates from what performance.now()
  // costs and allocates (it boxes a double on every call).
  const coarse = new RateLimiter({ limit, maxKeys: 10_000, clock: coarseClock() });
  const frozen = new RateLimiter({ limit, maxKeys: 10_000, clock: { now: () => 1_000 } });
  for (const k of keys) { coarse.allow(k); frozen.allow(k); }
  Object.assign(res, await nsPerCall({
    'sluice allow, coarseClock()': batch((k) => coarse.allow(k)),
    'sluice allow, constant clock (table alone)': batch((k) => frozen.allow(k)),
  }, quick ? { timeMs: 200, warmupMs: 50 } : {}));
  const bytes = {
    'Map GCRA, tryAcquire (object)': await bytesPerCall((i) => { sink = map.tryAcquire(keys[i % 1000]); }),
    'sluice tryAcquire (object)': await bytesPerCall((i) => { sink = sluice.tryAcquire(keys[i % 1000]); }),
    'Map GCRA, allow (boolean)': await bytesPerCall((i) => map.allow(keys[i % 1000])),
    'sluice allow (boolean)': await bytesPerCall((i) => sluice.allow(keys[i % 1000])),
    'Map GCRA, allow, performance read once': await bytesPerCall((i) => mapOnce.allow(keys[i % 1000])),
    'sluice allow, coarseClock()': await bytesPerCall((i) => coarse.allow(keys[i % 1000])),
    'sluice allow, constant clock (table alone)': await bytesPerCall((i) => frozen.allow(keys[i % 1000])),
    'performance.now() alone': await bytesPerCall(() => performance.now()),
  };
  return { res, bytes };
}

async function scaling(quick) {
  const limit = perSecond(1e6, { burst: 1e6 });
  const limiter = new RateLimiter({ limit, maxKeys: 10_000 });
  const coarse = new RateLimiter({ limit, maxKeys: 10_000, clock: coarseClock() });
  const keySets = [makeKeys(1_000, 'w0'), makeKeys(1_000, 'w1')];
  for (const set of keySets) for (const k of set) { limiter.allow(k); coarse.allow(k); }
  const rounds = quick ? 1 : 5;
  const ms = quick ? 200 : 1_000;
  const one = [];
  const two = [];
  const twoCoarse = [];
  const twoMaps = [];
  for (let r = 0; r < rounds; r++) { // alternate, so drift on a shared machine hits all alike
    one.push(await workerThroughput(limiter.handle, 1, keySets, ms));
    two.push(await workerThroughput(limiter.handle, 2, keySets, ms));
    twoCoarse.push(await workerThroughput(coarse.handle, 2, keySets, ms));
    twoMaps.push(await workerThroughput(null, 2, keySets, ms, limit));
  }
  return { one, two, twoCoarse, twoMaps };
}

function memory(quick) {
  const rows = [];
  const configs = [
    { maxKeyBytes: 64 }, { maxKeyBytes: 32 }, { maxKeyBytes: 24 }, { maxKeyBytes: 24, slotsPerKey: 1.5 }, { maxKeyBytes: 24, slotsPerKey: 1.25 },
  ];
  for (const { maxKeyBytes, slotsPerKey } of configs) {
    const maxKeys = quick ? 10_000 : 1_000_000;
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys, maxKeyBytes, ...(slotsPerKey === undefined ? {} : { slotsPerKey }) });
    const keys = makeKeys(maxKeys, 'm');
    let full = 0;
    const t0 = performance.now();
    for (const k of keys) if (!limiter.allow(k)) full++; // perSecond(10): a first request passes unless there is no slot
    const insertNs = ((performance.now() - t0) * 1e6) / maxKeys;
    const s = limiter.stats();
    const probes = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), monotonicClock), limiter.handle.keys).probeLengths();
    rows.push({ maxKeyBytes, slotsPerKey: slotsPerKey ?? SLOTS_PER_KEY, maxKeys, live: s.liveKeys, full, tableBytes: s.tableBytes, perKey: s.tableBytes / maxKeys, insertNs, probes });
  }
  return rows;
}

export async function runCore({ quick = false, withMemory = true } = {}) {
  const { res, bytes } = await singleThread(quick);
  const { one, two, twoCoarse, twoMaps } = await scaling(quick);
  const mem = withMemory ? memory(quick) : [];
  const lines = [];
  lines.push('## Core: one thread, existing keys (1k keys, 24-character strings)', '');
  lines.push('Each tinybench iteration makes 1,000 calls; figures are ns per call (median, p25-p75 over samples).', '');
  lines.push('| variant | ns/call median | p25-p75 | bytes/call | vs Map |', '|---|---:|---:|---:|---:|');
  const rows = [
    ['Map GCRA, tryAcquire (object)', 'Map GCRA, tryAcquire (object)'],
    ['sluice tryAcquire (object)', 'Map GCRA, tryAcquire (object)'],
    ['Map GCRA, allow (boolean)', 'Map GCRA, allow (boolean)'],
    ['sluice allow (boolean)', 'Map GCRA, allow (boolean)'],
    ['sluice allow, coarseClock()', 'Map GCRA, allow (boolean)'],
    ['sluice allow, constant clock (table alone)', 'Map GCRA, allow (boolean)'],
    ['Map GCRA, allow, performance read once', 'Map GCRA, allow (boolean)'],
  ];
  for (const [name, base] of rows) {
    const r = res[name];
    lines.push(`| ${name} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ${fmt(bytes[name], 1)} | ${fmt(r.median / res[base].median, 2)}x |`);
  }
  lines.push('', 'sluice\'s default clock reads the global `performance` once per thread and calls `now()` on it: in Node 20 the global is an ' +
    'accessor, run on every read. The Map GCRA, the reference of the targets below, reads the global per call, as a user would; ' +
    '"performance read once" is the same Map GCRA reading it once, for scale: sluice `allow` against it is ' +
    `${fmt(res['sluice allow (boolean)'].median / res['Map GCRA, allow, performance read once'].median, 2)}x.`);
  lines.push('', `A bare \`performance.now()\` call allocates ${fmt(bytes['performance.now() alone'], 1)} bytes here (a boxed double); the constant-clock row shows what the table itself allocates.`);
  const ratio = median(two) / median(one);
  lines.push('', '## Core: two workers on distinct keys against one', '');
  lines.push(`Each worker checks its own 1,000 existing keys in a loop for ${quick ? '0.2' : '1'} s; ${one.length} alternating rounds.`, '');
  lines.push('| workers | checks/s (median) | all rounds |', '|---:|---:|---|');
  lines.push(`| 1 | ${fmt(median(one))} | ${one.map((x) => fmt(x / 1e6, 2)).join(', ')} M |`);
  lines.push(`| 2 | ${fmt(median(two))} | ${two.map((x) => fmt(x / 1e6, 2)).join(', ')} M |`);
  lines.push(`| 2, sluice on coarseClock() | ${fmt(median(twoCoarse))} | ${twoCoarse.map((x) => fmt(x / 1e6, 2)).join(', ')} M |`);
  lines.push(`| 2, an unshared Map GCRA each (performance.now()) | ${fmt(median(twoMaps))} | ${twoMaps.map((x) => fmt(x / 1e6, 2)).join(', ')} M |`);
  const coarseVsMaps = median(twoCoarse) / median(twoMaps);
  lines.push('', `Two workers reach **${fmt(ratio, 2)}x** one worker's throughput. On coarseClock(), two workers sharing one limiter reach ` +
    `**${fmt(coarseVsMaps, 2)}x** two workers with a Map each (default clock: ${fmt(median(two) / median(twoMaps), 2)}x).`);
  lines.push('', '## Core: memory per tracked key', '');
  lines.push('Every key inserted once, distinct; "refused" counts first requests that found no slot (table full). Probes: slots a lookup of a live key reads (1 at its home slot), mean and largest, over the full table.', '');
  lines.push('| maxKeyBytes | slotsPerKey | maxKeys | keys inserted | refused | table bytes | bytes per key | insert ns/key | probes mean / max |', '|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const m of mem) {
    lines.push(`| ${m.maxKeyBytes} | ${m.slotsPerKey} | ${fmt(m.maxKeys)} | ${fmt(m.live)} | ${fmt(m.full)} | ${fmt(m.tableBytes)} | ${fmt(m.perKey, 1)} | ${fmt(m.insertNs)} | ${fmt(m.probes.mean, 2)} / ${fmt(m.probes.max)} |`);
  }
  const tryRatio = res['sluice tryAcquire (object)'].median / res['Map GCRA, tryAcquire (object)'].median;
  const allowRatio = res['sluice allow (boolean)'].median / res['Map GCRA, allow (boolean)'].median;
  const coarseRatio = res['sluice allow, coarseClock()'].median / res['Map GCRA, allow (boolean)'].median;
  const verdict = (ok) => (ok ? 'met' : '**missed**');
  lines.push('', '## Core: targets', '');
  lines.push('| target | measured | |', '|---|---:|---|');
  lines.push(`| tryAcquire on existing keys at most 1.5x the Map GCRA | ${fmt(tryRatio, 2)}x | ${verdict(tryRatio <= 1.5)} |`);
  lines.push(`| allow on existing keys at most 1.5x the Map GCRA | ${fmt(allowRatio, 2)}x | ${verdict(allowRatio <= 1.5)} |`);
  lines.push(`| allow on existing keys at most 1.3x the Map GCRA (aim 1.2x) | ${fmt(allowRatio, 2)}x | ${verdict(allowRatio <= 1.3)} |`);
  lines.push(`| allow on coarseClock() at most 1.1x the Map GCRA on performance.now() (aim 0.9x) | ${fmt(coarseRatio, 2)}x | ${verdict(coarseRatio <= 1.1)} |`);
  lines.push(`| zero bytes allocated per check by the table (under 1 B averaged over 20,000 calls) | ${fmt(bytes['sluice allow, constant clock (table alone)'], 1)} B | ${verdict(bytes['sluice allow, constant clock (table alone)'] < 1)} |`);
  lines.push(`| 2 workers on distinct keys at least 1.7x one worker | ${fmt(ratio, 2)}x | ${verdict(ratio >= 1.7)} |`);
  lines.push(`| 2 workers on coarseClock() at least 0.8x two unshared Maps | ${fmt(coarseVsMaps, 2)}x | ${verdict(coarseVsMaps >= 0.8)} |`);
  const dense = mem.find((m) => m.maxKeyBytes === 24 && m.slotsPerKey === 1.25);
  if (dense !== undefined) lines.push(`| at most 64 bytes per key at ${fmt(dense.maxKeys)} keys, maxKeyBytes 24 (slotsPerKey 1.25), none refused | ${fmt(dense.perKey, 1)} B, ${fmt(dense.full)} refused | ${verdict(dense.perKey <= 64 && dense.full === 0)} |`);
  lines.push('', 'With the default clock, `allow` allocates only what `performance.now()` allocates; `tryAcquire`',
    'also allocates its `Decision` object. The Map GCRA allocates a boxed double per stored TAT on top',
    'of the clock; its object variant allocates its `Decision` too.');
  return { markdown: lines.join('\n'), figures: { res, bytes, one, two, twoCoarse, twoMaps, ratio, mem } };
}
