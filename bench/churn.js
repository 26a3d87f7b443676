// The churn suite: a server sees new keys forever, and idle ones leave. sluice's RateLimiter
// against an unshared Map GCRA that deletes its idle keys, on the same traffic and the same
// injected clock, in one process: the first check of a never-seen key, mixed traffic on a fresh
// table and after 200x maxKeys of churn, the time to absorb that churn, probe lengths along the
// way (charted), second checks with 200,000 live keys in a 1,000,000-key table, memory per key.
import { writeFileSync } from 'node:fs';
import { perSecond, RateLimiter } from 'sluice';
import { gcraParams } from '../dist/math/gcra.js';
import { gcraSlotState } from '../dist/rate/gcra-slot.js';
import { EMPTY, S_CTRL } from '../dist/table/layout.js';
import { SlotTable } from '../dist/table/table.js';
import { createMapGcraSweeping } from './lib/map-gcra.js';
import { BATCH, fmt, gc, makeKeys, nsPerCallPaired, pairedRatio } from './lib/measure.js';
import { keyStream } from './lib/streams.js';
import { lineChart } from './lib/svg.js';

/** Every key's limit: admissions 100 ms apart. A key is idle (its state a fresh key's) 100 ms after its last one. */
const LIMIT = perSecond(10);
const BURST = LIMIT.burst ?? LIMIT.permits;
const MAX_KEYS = 100_000;
const KEY_BYTES = 24;
/** Live keys checked all the time. */
const WORKING = MAX_KEYS / 4;
/** New keys between two sweeps. */
const PHASE = MAX_KEYS / 4;
/**
 * One block of traffic is 10 checks: the first check of a never-seen key, the second check of
 * the key first seen GAP blocks before, and 8 checks of the working set, in turn. So 90% of the
 * checks go to keys already in the table and 10% are first checks; each new key is checked twice.
 */
const BLOCK = 10;
const WORKING_PER_BLOCK = 8;
const GAP = 32;
const RING = 64; // holds the last RING new keys (a power of two above GAP)
/**
 * Manual time per block. A phase (25,000 blocks) spans 500 ms, five times the limit's period: a
 * new key is idle 200 ms after its first check (two admissions), so most of a phase's new keys
 * are idle at its sweep and the rest at the next; a working-set key is checked every 3,125 blocks
 * (62.5 ms), faster than its limit: it never goes idle, and three of its checks in eight are refused.
 */
const STEP_MS = 0.02;
/** Rounds of working-set traffic that bring a new table's working set into its steady state. */
const WARM_ROUNDS = 4;
/** One seed for every table, so that a fresh table built for comparison has the same home slots. */
const HASH_SEED = 0x5eed;
/** The option that picks a table's layout (src/table/table-options.ts, LAYOUT_OPTION). */
const LAYOUT = Symbol.for('sluice.layout');
/**
 * The tables the churn runs: the HASHED layout at two densities (slotsPerKey 1.25 is the default),
 * and the SLAB layout (slots in arrival order behind a directory; not yet the default).
 */
const SHAPES = [
  { label: 'slotsPerKey 2', opts: { slotsPerKey: 2, [LAYOUT]: 'hashed' } },
  { label: 'slotsPerKey 1.25', opts: { slotsPerKey: 1.25, [LAYOUT]: 'hashed' } },
  { label: 'SLAB layout', opts: { [LAYOUT]: 'slab' } },
];
/** The SLAB layout's options, for the rows beside the defaults. */
const SLAB_OPTS = { [LAYOUT]: 'slab' };
/**
 * Rounds of the first-check, mixed and second-check tables: the contestants forward, then
 * backward, in turn (nsPerCallPaired), their ratios the median of each round's own.
 */
const ROUNDS = 7;
/** The tables of the first-check, second-check and memory rows. */
const BIG = 1_000_000;


/**
 * The clock every contestant reads, moved only by the benchmark, like a ManualClock. A plain
 * field: ManualClock.now() decodes a shared 64-bit word on every call (about 15 ns here, against
 * 1-3 ns for a field), a cost both sides would pay that would pull every ratio towards 1.
 * Each contestant has its own, so that each one's time follows its own traffic.
 */
class StepClock {
  constructor(ms = 1_000) {
    this.ms = ms;
  }

  now() {
    return this.ms;
  }
}

/** Key number `n` (never the same text for two numbers): "user:<m>", or an IPv4 address. */
function keyText(n) {
  const m = Math.floor(n / 2);
  if (n % 2 === 0) return `user:${m}`;
  const x = Math.imul(m, 0x9e3779b1) >>> 0; // an odd multiplier: a bijection of 32-bit numbers
  return `${x >>> 24}.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`;
}

/**
 * Keys `from` to `from + count - 1`, each read out of a Buffer as a server reads a key from a
 * request: a new flat string whose hash nobody has computed yet. Every contestant gets its own
 * strings, so that none of them finds a key already hashed by another.
 */
function freshKeys(from, count, text = keyText) {
  const buf = Buffer.allocUnsafe(count * KEY_BYTES); // keyText's longest is 15 bytes
  const ends = new Int32Array(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    at += buf.write(text(from + i), at, 'latin1');
    ends[i] = at;
  }
  const out = [];
  for (let i = 0, start = 0; i < count; start = ends[i], i++) out.push(buf.toString('latin1', start, ends[i]));
  return out;
}

function newLimiter(clock, opts = {}, { maxKeys = MAX_KEYS, cacheSize } = {}) {
  return new RateLimiter({
    limit: LIMIT, maxKeys, maxKeyBytes: KEY_BYTES, clock, hashSeed: HASH_SEED, ...opts,
    ...(cacheSize === undefined ? {} : { cacheSize }),
  });
}

/**
 * One contestant's traffic: its own clock, working set and stream of never-seen keys. `check`
 * makes one check; `endPhase(churn)` runs between phases (a sweep, or a new table).
 */
class Churn {
  constructor(clock, check, endPhase) {
    this.clock = clock;
    this.check = check;
    this.endPhase = endPhase;
    this.ws = makeKeys(WORKING, 'ws'); // 24-byte keys, this contestant's own strings
    this.ring = new Array(RING).fill(this.ws[0]); // before GAP new keys exist, second checks go to a working-set key
    this.made = 0; // new keys so far
    this.wsAt = 0;
    this.keys = freshKeys(0, PHASE);
    this.at = 0;
    this.checks = 0;
    this.allowed = 0;
  }

  /**
   * How a table starts: its working set brought to the state the traffic keeps it in, so that a
   * fresh table admits what a churned one does. Every key spends its burst, then WARM_ROUNDS
   * rounds of working-set checks run at the traffic's pace, ending at the clock's time. A new
   * table has no past, so its clock may start that far back (about 250 ms).
   *
   * The bursts are spent in BURST rounds over the working set, as traffic comes, not key by key:
   * the states are the same (the clock stands still meanwhile), and so is the per-thread key
   * cache's view of the traffic. Key by key, each key's BURST checks in a row miss the cache three
   * times (its insert, then two finds before the cache keeps it: slot-index.ts, #admit), over a
   * quarter of the lookups, and two such windows turn the cache off for 32 windows, longer than a
   * fresh table lives: all of its lookups then missed the cache.
   */
  load() {
    const end = this.clock.ms;
    const perCheck = STEP_MS / WORKING_PER_BLOCK;
    this.clock.ms = end - WARM_ROUNDS * WORKING * perCheck;
    for (let i = 0; i < BURST; i++) for (const k of this.ws) this.check(k);
    for (let i = 0, at = this.wsAt; i < WARM_ROUNDS * WORKING; i++) {
      this.check(this.ws[at]);
      if (++at === WORKING) at = 0;
      this.clock.ms += perCheck;
    }
    this.clock.ms = end;
  }

  get phaseDone() {
    return this.at === PHASE;
  }

  /** Ends a phase: the contestant's own step (timed; returns ms), then the next phase's keys (not timed). */
  nextPhase() {
    const t0 = performance.now();
    this.endPhase(this);
    const ms = performance.now() - t0;
    this.keys = freshKeys(this.made, PHASE);
    this.at = 0;
    return ms;
  }

  /** `blocks` blocks of traffic, within one phase. */
  run(blocks) {
    const { check, ws, ring, keys, clock } = this;
    let { at, made, wsAt } = this;
    let allowed = 0;
    for (let b = 0; b < blocks; b++) {
      const key = keys[at++];
      if (check(key)) allowed++;
      ring[made & (RING - 1)] = key;
      if (check(ring[(made - GAP) & (RING - 1)])) allowed++;
      made++;
      for (let i = 0; i < WORKING_PER_BLOCK; i++) {
        if (check(ws[wsAt])) allowed++;
        if (++wsAt === WORKING) wsAt = 0;
      }
      clock.ms += STEP_MS;
    }
    this.at = at;
    this.made = made;
    this.wsAt = wsAt;
    this.checks += blocks * BLOCK;
    this.allowed += allowed;
  }
}

/** A limiter that sweeps between phases, and its traffic. */
function sweepingSluice(shape) {
  const clock = new StepClock();
  const limiter = newLimiter(clock, shape.opts);
  const churn = new Churn(clock, (k) => limiter.allow(k), () => limiter.sweep());
  churn.load();
  return { limiter, clock, churn };
}

/** A limiter that never sees more than one phase: a new table (and working set) replaces it between phases. */
function freshSluice(shape) {
  const clock = new StepClock();
  let limiter = newLimiter(clock, shape.opts);
  const churn = new Churn(clock, (k) => limiter.allow(k), (c) => {
    limiter = newLimiter(clock, shape.opts);
    gc(); // the old table goes now, not during a later timed batch
    c.load();
  });
  churn.load();
  return { churn };
}

function sweepingMap() {
  const clock = new StepClock();
  const map = createMapGcraSweeping(LIMIT, clock);
  const churn = new Churn(clock, (k) => map.allow(k), () => map.sweep());
  churn.load();
  return { map, clock, churn };
}

/**
 * Miss lengths the way a build whose probeLengths() reports hits only would need them: from each
 * slot taken as a home, the slots read up to and including the first EMPTY one in its stripe
 * (wrapping), or the whole stripe when it has none.
 */
function missScan(table) {
  const S = table.slotsPerStripe;
  const empty = (slot) => (Atomics.load(table.words, table.base(slot) + S_CTRL) & 3) === EMPTY;
  let sum = 0;
  let max = 0;
  for (let start = 0; start < table.capacity; start += S) {
    let first = -1;
    for (let i = 0; i < S && first < 0; i++) if (empty(start + i)) first = i;
    if (first < 0) {
      sum += S * S;
      max = S;
      continue;
    }
    // Backwards round the stripe from an EMPTY slot: each slot reads one more than the next one.
    for (let k = 0, run = 0; k < S; k++) {
      const i = (first - k + S) % S;
      run = empty(start + i) ? 1 : run + 1;
      sum += run;
      if (run > max) max = run;
    }
  }
  return { mean: sum / table.capacity, max };
}

/** Probe lengths of a limiter's table (the table's own probeLengths(), through dist/), and its counts. */
function probesOf(limiter, clock) {
  const table = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), clock), limiter.handle.keys);
  const p = table.probeLengths();
  const miss = p.missMean === undefined ? missScan(table) : { mean: p.missMean, max: p.missMax };
  const s = limiter.stats();
  return { mean: p.mean, max: p.max, missMean: miss.mean, missMax: miss.max, live: s.liveKeys, tombstones: s.tombstones };
}

/** The same keys inserted into a new table of the same shape and seed: what the churned table is held to. */
function freshProbes(shape, keys, atMs) {
  const clock = new StepClock(atMs);
  const limiter = newLimiter(clock, shape.opts);
  for (const k of keys) limiter.allow(k);
  return probesOf(limiter, clock);
}

// ---------------------------------------------------------------------------------------------
// 1. The first check of a never-seen key.

async function firstChecks(quick) {
  const perTable = BIG / 2; // each table or Map takes this many new keys, then a new one replaces it
  const chunk = 50_000;
  const clock = new StepClock(); // time stands still: every first check is admitted
  /** A batch of first checks on whatever `build()` makes, renewed every `perTable` keys outside the timed part. */
  const task = (build) => {
    let check = build();
    let keys = freshKeys(0, chunk);
    let at = 0;
    let made = 0;
    let held = 0;
    return () => {
      if (held >= perTable) {
        check = build();
        gc();
        held = 0;
      }
      if (at === keys.length) {
        keys = freshKeys(made, chunk);
        at = 0;
      }
      const t0 = performance.now();
      for (let i = 0; i < BATCH; i++) check(keys[at + i]);
      const ms = performance.now() - t0;
      at += BATCH;
      made += BATCH;
      held += BATCH;
      return { overriddenDuration: ms };
    };
  };
  const tasks = {
    'Map get + set': task(() => {
      const m = new Map();
      let v = 0;
      return (k) => { if (m.get(k) === undefined) m.set(k, v++); };
    }),
    'Map GCRA allow': task(() => {
      const m = createMapGcraSweeping(LIMIT, clock);
      return (k) => m.allow(k);
    }),
    'sluice allow': task(() => {
      const l = newLimiter(clock, {}, { maxKeys: BIG });
      return (k) => l.allow(k);
    }),
    'sluice allow, cacheSize 0': task(() => {
      const l = newLimiter(clock, {}, { maxKeys: BIG, cacheSize: 0 });
      return (k) => l.allow(k);
    }),
    'sluice allow, slotsPerKey 2': task(() => {
      const l = newLimiter(clock, { slotsPerKey: 2 }, { maxKeys: BIG });
      return (k) => l.allow(k);
    }),
    'sluice allow, SLAB layout': task(() => {
      const l = newLimiter(clock, SLAB_OPTS, { maxKeys: BIG });
      return (k) => l.allow(k);
    }),
  };
  const res = await nsPerCallPaired(tasks, { rounds: quick ? 1 : ROUNDS, ...(quick ? { timeMs: 150, warmupMs: 50 } : { timeMs: 300, warmupMs: 50 }) });
  gc();
  return { res, perTable };
}

// ---------------------------------------------------------------------------------------------
// 2. The churn: every contestant absorbs 200x maxKeys new keys, phase by phase, in turn.

async function absorb(quick) {
  // Points of the curve, in phases (maxKeys / 4 new keys each): close together where the table
  // changes fastest (its first few sweeps), then every 10x and every 20x maxKeys.
  const points = quick
    ? [0, 1, 2, 3, 4]
    : [0, 1, 2, 4, 8, 16, 32, 48, 64, 80, 120, 160, 200, 280, 360, 440, 520, 600, 680, 760, 800];
  const sluices = SHAPES.map((shape) => ({ shape, ...sweepingSluice(shape), checkMs: 0, sweepMs: 0, rows: [] }));
  const map = { ...sweepingMap(), checkMs: 0, sweepMs: 0, rows: [] };
  const contestants = [...sluices, map];
  const record = (i, seg) => {
    const atMs = map.clock.ms; // every contestant's clock has moved alike
    const refKeys = [...map.map.keys()]; // the live keys after the Map's sweep: the same as the table's
    for (const s of sluices) {
      const now = probesOf(s.limiter, s.clock);
      const fresh = freshProbes(s.shape, refKeys, atMs);
      s.rows.push({ phases: points[i], now, fresh, ns: seg?.get(s).ns, sweepMs: seg?.get(s).sweepMs });
    }
    map.rows.push({ phases: points[i], ns: seg?.get(map).ns, size: map.map.size });
  };
  record(0, null);
  let turn = 0;
  for (let i = 1; i < points.length; i++) {
    const phases = points[i] - points[i - 1];
    const seg = new Map(contestants.map((c) => [c, { checks: c.churn.checks, checkMs: 0, sweepMs: 0 }]));
    // Contestants take turns phase by phase (250,000 checks, 0.1-0.2 s each), each phase started
    // by the next one, so that a busy spell of the shared machine falls on all of them alike.
    for (let p = 0; p < phases; p++, turn++) {
      for (let c = 0; c < contestants.length; c++) {
        const who = contestants[(c + turn) % contestants.length];
        const t0 = performance.now();
        who.churn.run(PHASE);
        const ms = performance.now() - t0;
        const sweepMs = who.churn.nextPhase();
        seg.get(who).checkMs += ms;
        seg.get(who).sweepMs += sweepMs;
        who.checkMs += ms;
        who.sweepMs += sweepMs;
      }
    }
    for (const [c, x] of seg) seg.set(c, { ns: (x.checkMs * 1e6) / (c.churn.checks - x.checks), sweepMs: x.sweepMs / phases });
    record(i, seg);
  }
  // The figures of the absorb table, before the mixed-traffic rows take these contestants further.
  for (const c of contestants) c.end = { checks: c.churn.checks, allowed: c.churn.allowed, held: c === map ? map.map.size : c.rows[c.rows.length - 1].now.live };
  return { points, sluices, map };
}

// ---------------------------------------------------------------------------------------------
// 3. Mixed traffic, ns per check: the Map, fresh tables, and the churned tables of step 2.

async function mixed(quick, churned) {
  const works = {
    'Map GCRA, deletes idle keys': churned.map.churn,
  };
  for (const s of churned.sluices) {
    works[`sluice, fresh table, ${s.shape.label}`] = freshSluice(s.shape).churn;
    works[`sluice, after churn, ${s.shape.label}`] = s.churn;
  }
  // Sweeps, new tables and new keys between phases are outside the timed part: a batch is 100 blocks.
  const task = (churn) => () => {
    if (churn.phaseDone) churn.nextPhase();
    const t0 = performance.now();
    churn.run(BATCH / BLOCK);
    return { overriddenDuration: performance.now() - t0 };
  };
  const names = Object.keys(works);
  const rounds = quick ? 1 : ROUNDS;
  // The share admitted, counted over the timed rounds (each round's counts from the one before).
  const allowed = Object.fromEntries(names.map((n) => [n, { checks: 0, allowed: 0 }]));
  let before = Object.fromEntries(names.map((n) => [n, { checks: works[n].checks, allowed: works[n].allowed }]));
  const out = await nsPerCallPaired(Object.fromEntries(names.map((n) => [n, task(works[n])])), {
    rounds, ...(quick ? { timeMs: 150, warmupMs: 50 } : { timeMs: 250, warmupMs: 50 }),
    onRound: () => {
      for (const n of names) {
        allowed[n].checks += works[n].checks - before[n].checks;
        allowed[n].allowed += works[n].allowed - before[n].allowed;
      }
      before = Object.fromEntries(names.map((n) => [n, { checks: works[n].checks, allowed: works[n].allowed }]));
    },
  });
  for (const n of names) out[n].allowed = allowed[n].allowed / allowed[n].checks;
  return { res: out, rounds };
}


// ---------------------------------------------------------------------------------------------
// 4. 200,000 live keys in a 1,000,000-key table: second checks, drawn evenly.

async function secondChecks(quick) {
  const live = 200_000;
  const length = 2 ** 19;
  const stream = keyStream('uniform', live, length, { seed: 11 });
  const mask = length - 1;
  const task = (build) => {
    const clock = new StepClock();
    const check = build(clock);
    const keys = freshKeys(0, live);
    for (const k of keys) check(k); // the first checks
    let j = 0;
    return () => {
      for (let i = 0; i < BATCH; i++) check(keys[stream[(j++) & mask]]);
      clock.ms += 1; // a key comes back every ~200 ms of this time: admitted
    };
  };
  const res = await nsPerCallPaired({
    'Map GCRA': task((clock) => {
      const m = createMapGcraSweeping(LIMIT, clock);
      return (k) => m.allow(k);
    }),
    'sluice allow': task((clock) => {
      const l = newLimiter(clock, {}, { maxKeys: BIG });
      return (k) => l.allow(k);
    }),
    'sluice allow, cacheSize 0': task((clock) => {
      const l = newLimiter(clock, {}, { maxKeys: BIG, cacheSize: 0 });
      return (k) => l.allow(k);
    }),
    'sluice allow, SLAB layout': task((clock) => {
      const l = newLimiter(clock, SLAB_OPTS, { maxKeys: BIG });
      return (k) => l.allow(k);
    }),
    'sluice allow, SLAB layout, cacheSize 0': task((clock) => {
      const l = newLimiter(clock, SLAB_OPTS, { maxKeys: BIG, cacheSize: 0 });
      return (k) => l.allow(k);
    }),
  }, { rounds: quick ? 1 : ROUNDS, ...(quick ? { timeMs: 150, warmupMs: 50 } : { timeMs: 300, warmupMs: 50 }) });
  gc();
  return { res, live };
}

// ---------------------------------------------------------------------------------------------
// 5. Memory per key: a table filled to maxKeys, its bytes and its key heap's over the keys held;
// and a Map GCRA's heap for scale.

function memory(quick) {
  const rows = [];
  const n = quick ? 100_000 : BIG;
  const key24 = (i) => `m:tenant-${String(i).padStart(7, '0')}:api`.padEnd(KEY_BYTES, '.');
  const key64 = (i) => `m:tenant-${String(i).padStart(7, '0')}:api-token:`.padEnd(64, 'x');
  for (const [label, opts, text, keyBytes] of [
    ['default options', {}, key24, 24],
    ['default options', {}, key64, 64],
    ['maxKeyBytes 24 (no key heap)', { maxKeyBytes: 24 }, key24, 24],
    ['slotsPerKey 2', { slotsPerKey: 2 }, key24, 24],
    ['slotsPerKey 2', { slotsPerKey: 2 }, key64, 64],
    ['SLAB layout', SLAB_OPTS, key24, 24],
    ['SLAB layout', SLAB_OPTS, key64, 64],
  ]) {
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys: n, clock: new StepClock(), ...opts });
    for (let i = 0; i < n; i++) limiter.allow(text(i));
    const s = limiter.stats();
    // None refused while the keys are within maxKeys: every one holds a slot.
    if (s.liveKeys !== n) throw new Error(`${label}: ${s.liveKeys} keys of ${keyBytes} bytes held, not ${n}`);
    rows.push({
      label, keyBytes, slotsPerKey: opts[LAYOUT] === 'slab' ? '-' : opts.slotsPerKey ?? 1.25, capacity: s.capacity, tableBytes: s.tableBytes, keyHeapBytes: s.keyHeapBytes,
      perKey: (s.tableBytes + s.keyHeapBytes) / n,
    });
  }
  // A Map GCRA holding n keys of 24 bytes (flat strings, as read from requests): its heap growth,
  // key strings included.
  gc();
  const before = process.memoryUsage().heapUsed;
  const clock = new StepClock();
  const map = createMapGcraSweeping(LIMIT, clock);
  for (let from = 0; from < n; from += 50_000) for (const k of freshKeys(from, Math.min(50_000, n - from), key24)) map.allow(k);
  gc();
  const mapPerKey = (process.memoryUsage().heapUsed - before) / n;
  if (map.size !== n) throw new Error(`Map GCRA holds ${map.size} keys, not ${n}`);
  return { rows, mapPerKey, mapKeys: n, keys: n };
}

// ---------------------------------------------------------------------------------------------

const verdict = (ok) => (ok ? 'met' : '**missed**');
const ratioText = (x) => `${fmt(x, 2)}x`;

/** How a table of `nsPerCallPaired` rows was measured, for its caption. */
function roundsText(rows) {
  const n = Object.values(rows)[0].rounds.length;
  return `median of ${n} round${n > 1 ? 's' : ''}, run forward and backward in turn; the ratios are the median of each round's own`;
}

/** A table of `nsPerCallPaired` rows against the row named `base`. */
function pairedTable(lines, rows, base) {
  lines.push(`| contestant | ns/check median | p25-p75 | all rounds | vs ${base} |`, '|---|---:|---:|---|---:|');
  for (const [name, r] of Object.entries(rows)) {
    lines.push(`| ${name} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ${r.rounds.map((x) => fmt(x, 0)).join(', ')} | ${ratioText(pairedRatio(r, rows[base]))} |`);
  }
}

export async function runChurn({ quick = false, svgDir } = {}) {
  const first = await firstChecks(quick);
  const churned = await absorb(quick);
  const mix = await mixed(quick, churned);
  const second = await secondChecks(quick);
  const mem = memory(quick);

  const absorbedPhases = churned.points[churned.points.length - 1];
  const absorbedX = (absorbedPhases * PHASE) / MAX_KEYS;
  const lines = [`## Churn: new keys forever, idle keys swept (maxKeys ${fmt(MAX_KEYS)}, maxKeyBytes ${KEY_BYTES})`, ''];
  lines.push(`Each contestant runs the same traffic on its own injected clock (a field the benchmark moves: idle points come by moving time, not by waiting), ` +
    `limit perSecond(10). A working set of ${fmt(WORKING)} keys (24 bytes) stays live; never-seen keys ("user:<n>" and IPv4 addresses, 7 to 15 bytes, read out of a Buffer ` +
    'as a server reads them, so that nobody has hashed them yet) arrive without end. In every block of 10 checks: the first check of a new key, the second ' +
    `check of the key first seen ${GAP} blocks before, and 8 checks of the working set in turn, so 90% of the checks go to keys already held and 10% are first checks. ` +
    `The clock moves ${STEP_MS} ms per block: a working-set key comes back every 62.5 ms, faster than its limit, so it never goes idle and three of its checks in eight are refused; ` +
    `a new key is idle 200 ms after its first check. After every ${fmt(PHASE)} new keys (a phase, 500 ms) the limiter sweeps and the Map deletes its idle keys ` +
    '(TAT behind now, sluice\'s own test). sluice runs with its defaults (the per-thread key cache included) and one hash seed for every table.', '');

  // 1. First checks.
  const f = first.res;
  lines.push(`## Churn: the first check of a never-seen key (tables for ${fmt(BIG)} keys, maxKeyBytes ${KEY_BYTES})`, '');
  lines.push(`ns per first check (median of batches of ${fmt(BATCH)}, p25-p75; ${roundsText(first.res)}). Every check is of a key never seen before. ` +
    `Each table (and each Map) takes ${fmt(first.perTable)} new keys ` +
    'and is then replaced by an empty one, outside the timed batches: the rows average over a table from empty to half of maxKeys. ' +
    'The rows run at the default density (slotsPerKey 1.25) but the last two (slotsPerKey 2; the SLAB layout, not yet the default). ' +
    'A new limiter\'s key cache starts on, unproven: it keeps 1,024 of the keys it inserts per window, consults its Map on one lookup in 64 after a span ' +
    'of 4,096 lookups without a hit, and turns itself off after two windows of lookups in which more than a quarter missed (131,072 each at the default size): ' +
    'the default rows have all three (once proven, a cache keeps no key it inserts, and a found key at its second find in a window). ' +
    '"Map get + set" is the bare Map work of a first check, `if (m.get(k) === undefined) m.set(k, n)`.', '');
  pairedTable(lines, f, 'Map get + set');

  // 2. Mixed traffic.
  const m = mix.res;
  const mapName = 'Map GCRA, deletes idle keys';
  lines.push('', '## Churn: mixed traffic, a fresh table against one after the churn', '');
  lines.push(`ns per check (median of batches of ${fmt(BATCH)} checks, p25-p75; median of ${mix.rounds} round${mix.rounds > 1 ? 's' : ''}, run forward and backward in turn). ` +
    'The ratios are the median of each round\'s own ratio, so that a busy spell of the machine, which moves a whole round, cancels out. ' +
    'Sweeps, new tables and new keys between phases are outside the timed batches (the sweeps\' cost is in the absorb table below). ' +
    `A fresh table never sees more than one phase: a new one replaces it at each phase's end, its working set brought to the same debt as the traffic keeps it at (its burst spent in rounds over the set, as traffic spends it, then four rounds of working-set checks at the traffic's pace; spent key by key, the bursts would miss the per-thread key cache so often that it turned itself off for the table's whole life). ` +
    `"After churn" is the table of the next section after its ${fmt(absorbedX)}x maxKeys new keys, going on; the Map is that section's Map, going on. ` +
    '"allowed" is the share of checks admitted: the same traffic, the same share.', '');
  lines.push('| contestant | ns/check median | p25-p75 | all rounds | vs Map | vs fresh table | allowed |', '|---|---:|---:|---|---:|---:|---:|');
  for (const name of Object.keys(m)) {
    const fresh = name.includes('after churn') ? m[name.replace('after churn', 'fresh table')] : null;
    lines.push(`| ${name} | ${fmt(m[name].median, 1)} | ${fmt(m[name].p25, 1)}-${fmt(m[name].p75, 1)} | ${m[name].rounds.map((x) => fmt(x, 0)).join(', ')} | ` +
      `${ratioText(pairedRatio(m[name], m[mapName]))} | ${fresh ? ratioText(pairedRatio(m[name], fresh)) : ''} | ${fmt(m[name].allowed * 100, 1)}% |`);
  }

  // 3. Absorbing the churn.
  const mp = churned.map;
  const mapTotal = mp.checkMs + mp.sweepMs;
  lines.push('', `## Churn: absorbing ${fmt(absorbedX)}x maxKeys new keys`, '');
  lines.push(`Each contestant absorbs ${fmt(absorbedPhases * PHASE)} never-seen keys (${fmt(mp.end.checks)} checks with the working set's), phase by phase; ` +
    'the contestants take turns phase by phase, each starting the next phase in turn. ' +
    'Time is checks plus sweeps (the Map: deleting idle keys); making the new keys is not counted.', '');
  lines.push('| contestant | checks s | sweeps s | total s | ns per check, sweeps included | vs Map | allowed | keys held at the end | tombstones |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  const absorbRow = (name, c, tombs) => {
    const total = c.checkMs + c.sweepMs;
    lines.push(`| ${name} | ${fmt(c.checkMs / 1000, 1)} | ${fmt(c.sweepMs / 1000, 2)} | ${fmt(total / 1000, 1)} | ${fmt((total * 1e6) / c.end.checks, 1)} | ` +
      `${ratioText(total / mapTotal)} | ${fmt((c.end.allowed / c.end.checks) * 100, 2)}% | ${fmt(c.end.held)} | ${tombs} |`);
  };
  absorbRow(mapName, mp, '');
  for (const s of churned.sluices) absorbRow(`sluice, ${s.shape.label}`, s, fmt(s.rows[s.rows.length - 1].now.tombstones));

  // 4. The curve.
  lines.push('', '## Churn: probe lengths and ns per check along the churn', '');
  lines.push('At each point, right after a sweep: "probe" is the slots a lookup of each live key reads (1 at its home slot), mean / max; ' +
    '"miss" the slots a lookup of an absent key reads, from each slot taken as its home up to the first empty slot in its stripe (at most the stripe: ' +
    '64 slots at slotsPerKey 2, 1,024 at 1.25), mean / max; a first check reads such a chain before it inserts. Both come from the table\'s ' +
    '`probeLengths()`, which the public limiter does not expose: the suite opens the table through `SlotTable` from dist/, as the core suite does ' +
    '(the miss figures are computed here from the slots\' ctrl words when the build\'s probeLengths() lacks them). ' +
    'In a SLAB table a probe reads directory entries (16 to a cache line, 1,024 to a stripe) and the slot of an entry whose tag matches; its ' +
    'tombstones are the directory\'s (the entry of a freed slot becomes one when the slot\'s next claimer or a sweep clears it). ' +
    '"fresh" is a new table of the same shape and hash seed holding the same live keys (the Map\'s, after its own sweep at the same time). ' +
    'ns per check is the segment ending at the point, sweeps excluded.', '');
  for (const s of churned.sluices) {
    lines.push(`${s.shape.label}:`, '');
    lines.push('| new keys absorbed | x maxKeys | ns/check | Map ns/check | vs Map | probe mean / max | fresh | probe / fresh | miss mean / max | fresh | live keys | tombstones | sweep ms |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    s.rows.forEach((r, i) => {
      const mr = mp.rows[i];
      lines.push(`| ${fmt(r.phases * PHASE)} | ${fmt((r.phases * PHASE) / MAX_KEYS, 2)} | ${r.ns === undefined ? '' : fmt(r.ns, 0)} | ${mr.ns === undefined ? '' : fmt(mr.ns, 0)} | ` +
        `${r.ns === undefined ? '' : ratioText(r.ns / mr.ns)} | ${fmt(r.now.mean, 3)} / ${fmt(r.now.max)} | ${fmt(r.fresh.mean, 3)} / ${fmt(r.fresh.max)} | ${ratioText(r.now.mean / r.fresh.mean)} | ` +
        `${fmt(r.now.missMean, 2)} / ${fmt(r.now.missMax)} | ${fmt(r.fresh.missMean, 2)} / ${fmt(r.fresh.missMax)} | ${fmt(r.now.live)} | ${fmt(r.now.tombstones)} | ${r.sweepMs === undefined ? '' : fmt(r.sweepMs, 1)} |`);
    });
    lines.push('');
  }
  const mapHeld = mp.rows.map((r) => r.size);
  const liveGap = Math.max(...churned.sluices.flatMap((s) => s.rows.map((r, i) => Math.abs(r.now.live - (mapHeld[i] ?? 0)))));
  lines.push(`The Map held the same keys as each table at every point, ${liveGap === 0 ? 'exactly' : `to within ${fmt(liveGap)} key${liveGap === 1 ? '' : 's'} (GCRA in ticks against GCRA in ms)`}.`);
  const xLabel = 'new keys absorbed, x maxKeys (100,000)';
  const xOf = (r) => +((r.phases * PHASE) / MAX_KEYS).toFixed(2);
  const charts = [
    ['churn-probe.svg', lineChart({
      title: 'Mean probe of a live key along the churn', xLabel, yLabel: 'slots read', width: 900,
      series: churned.sluices.flatMap((s) => [
        { name: `churned, ${s.shape.label}`, points: s.rows.map((r) => [xOf(r), r.now.mean]) },
        { name: `fresh, ${s.shape.label}`, points: s.rows.map((r) => [xOf(r), r.fresh.mean]) },
      ]),
    })],
    ['churn-miss.svg', lineChart({
      title: 'Mean miss (a never-seen key\'s lookup) along the churn', xLabel, yLabel: 'slots read', width: 900,
      series: churned.sluices.flatMap((s) => [
        { name: `churned, ${s.shape.label}`, points: s.rows.map((r) => [xOf(r), r.now.missMean]) },
        { name: `fresh, ${s.shape.label}`, points: s.rows.map((r) => [xOf(r), r.fresh.missMean]) },
      ]),
    })],
    ['churn-ns.svg', lineChart({
      title: 'ns per check along the churn (90% held keys, 10% first checks)', xLabel, yLabel: 'ns per check', width: 900,
      series: [
        ...churned.sluices.map((s) => ({ name: `sluice, ${s.shape.label}`, points: s.rows.slice(1).map((r) => [xOf(r), r.ns]) })),
        { name: 'Map GCRA', points: mp.rows.slice(1).map((r) => [xOf(r), r.ns]) },
      ],
    })],
  ];
  for (const [file, svg] of charts) if (svgDir) writeFileSync(new URL(file, svgDir), svg);
  lines.push('', ...charts.map(([file]) => `![${file}](${file})`));

  // 5. Second checks.
  const sc = second.res;
  lines.push('', `## Churn: ${fmt(second.live)} live keys in a ${fmt(BIG)}-key table, second checks`, '');
  lines.push(`ns per check (median of batches of ${fmt(BATCH)}, p25-p75; ${roundsText(sc)}): every key checked once first, then checks drawn evenly ` +
    `from all ${fmt(second.live)} keys (a seeded stream); time moves 1 ms per batch, so a key comes back after about 200 ms and is admitted. ` +
    'The per-thread cache holds 65,536 entries by default, a third of the keys: most lookups miss it, and it turns itself off.', '');
  pairedTable(lines, sc, 'Map GCRA');

  // 6. Memory.
  lines.push('', `## Churn: memory per key (${fmt(mem.keys)} keys in a table for ${fmt(mem.keys)})`, '');
  lines.push('The table is allocated whole when the limiter is made; the key heap (long keys past the 24 bytes a slot holds) grows with ' +
    'the long keys stored. Bytes per key: the table and its heap over the keys held, the table filled to maxKeys (none refused). ' +
    `For scale, a Map GCRA holding ${fmt(mem.mapKeys)} keys of 24 bytes grows the heap by ${fmt(mem.mapPerKey, 1)} bytes per key, its key strings included.`, '');
  lines.push('| table | key bytes | slotsPerKey | slots | table bytes | key heap bytes | bytes per key |', '|---|---:|---:|---:|---:|---:|---:|');
  for (const r of mem.rows) {
    lines.push(`| ${r.label} | ${r.keyBytes} | ${r.slotsPerKey} | ${fmt(r.capacity)} | ${fmt(r.tableBytes)} | ${fmt(r.keyHeapBytes)} | ${fmt(r.perKey, 1)} |`);
  }

  // 7. Targets.
  const firstRatio = pairedRatio(f['sluice allow'], f['Map get + set']);
  const mixRatio = (label) => pairedRatio(m[`sluice, fresh table, ${label}`], m[mapName]);
  const churnRatio = (label) => pairedRatio(m[`sluice, after churn, ${label}`], m[`sluice, fresh table, ${label}`]);
  const absorbRatio = (s) => (s.checkMs + s.sweepMs) / mapTotal;
  const secondRatio = (name) => pairedRatio(sc[name], sc['Map GCRA']);
  const worstProbe = (s) => Math.max(...s.rows.map((r) => r.now.mean / r.fresh.mean));
  lines.push('', '## Churn: targets', '');
  lines.push('| target | measured | |', '|---|---:|---|');
  lines.push(`| first check of a never-seen key (${fmt(BIG)}-key table, maxKeyBytes 24) at most 2x a Map get + set (aim 1.5x) | ${ratioText(firstRatio)} | ${verdict(firstRatio <= 2)}${firstRatio <= 2 ? (firstRatio <= 1.5 ? ', aim met' : ', aim missed') : ''} |`);
  const firstSlab = pairedRatio(f['sluice allow, SLAB layout'], f['Map get + set']);
  lines.push(`| the same, SLAB layout | ${ratioText(firstSlab)} | ${verdict(firstSlab <= 2)}${firstSlab <= 2 ? (firstSlab <= 1.5 ? ', aim met' : ', aim missed') : ''} |`);
  for (const s of churned.sluices) {
    lines.push(`| mixed traffic on a fresh table at most 1.3x the Map GCRA that deletes idle keys (${s.shape.label}) | ${ratioText(mixRatio(s.shape.label))} | ${verdict(mixRatio(s.shape.label) <= 1.3)} |`);
  }
  for (const s of churned.sluices) {
    lines.push(`| mixed traffic after ${fmt(absorbedX)}x maxKeys of churn within 1.1x of the fresh table (${s.shape.label}) | ${ratioText(churnRatio(s.shape.label))} | ${verdict(churnRatio(s.shape.label) <= 1.1)} |`);
  }
  for (const s of churned.sluices) {
    lines.push(`| absorbing the churn at most 2x the Map's time (${s.shape.label}) | ${ratioText(absorbRatio(s))} | ${verdict(absorbRatio(s) <= 2)} |`);
  }
  for (const name of ['sluice allow', 'sluice allow, cacheSize 0', 'sluice allow, SLAB layout', 'sluice allow, SLAB layout, cacheSize 0']) {
    const what = `${name.includes('SLAB') ? 'SLAB layout, ' : ''}${name.endsWith('cacheSize 0') ? 'cacheSize 0' : 'default cache'}`;
    lines.push(`| ${fmt(second.live)} live keys in a ${fmt(BIG)}-key table, second check, at most 1.5x the Map (${what}) | ${ratioText(secondRatio(name))} | ${verdict(secondRatio(name) <= 1.5)} |`);
  }
  for (const s of churned.sluices) {
    lines.push(`| mean probe within 1.2x of a fresh table's at every point of the curve (${s.shape.label}; worst point) | ${ratioText(worstProbe(s))} | ${verdict(worstProbe(s) <= 1.2)} |`);
  }
  // Every option at its default; with maxKeyBytes 24 set by hand (no key heap), for scale.
  const mem24 = mem.rows[0];
  const mem64 = mem.rows[1];
  const memNoHeap = mem.rows[2];
  lines.push(`| memory, default options, ${fmt(mem.keys)} keys of up to 24 bytes: at most 64 B per key (aim 48 B); with maxKeyBytes 24 set: ${fmt(memNoHeap.perKey, 1)} B | ${fmt(mem24.perKey, 1)} B | ${verdict(mem24.perKey <= 64)}${mem24.perKey <= 64 ? (mem24.perKey <= 48 ? ', aim met' : ', aim missed') : ''} |`);
  lines.push(`| memory, default options, ${fmt(mem.keys)} keys of 64 bytes: measured and published | ${fmt(mem64.perKey, 1)} B | published |`);
  const slab24 = mem.rows.find((r) => r.label === 'SLAB layout' && r.keyBytes === 24);
  const slab64 = mem.rows.find((r) => r.label === 'SLAB layout' && r.keyBytes === 64);
  lines.push(`| the same, SLAB layout: keys of up to 24 bytes, at most 64 B per key (aim 48 B) | ${fmt(slab24.perKey, 1)} B | ${verdict(slab24.perKey <= 64)}${slab24.perKey <= 64 ? (slab24.perKey <= 48 ? ', aim met' : ', aim missed') : ''} |`);
  lines.push(`| the same, SLAB layout: keys of 64 bytes | ${fmt(slab64.perKey, 1)} B | published |`);
  if (quick) lines.push('', `(quick run: ${fmt(absorbedX)}x maxKeys of churn instead of 200x, and short timings; the figures are a smoke test.)`);

  return { markdown: lines.join('\n'), figures: { first, churned, mix, second, mem } };
}
