// The width of the per-key state word. First, one read-modify-compare-and-swap on each kind of
// word: why the limiter keeps one int32 TAT whenever the limit fits, and why its 64-bit path reads
// the word as two int32 halves. Then the limiter's two lock-free paths side by side (issue 8):
// ns and bytes per check on existing keys, mostly allowed and mostly refused, and two workers.
import { perDay, perHour, perSecond, RateLimiter } from 'sluice';
import { BATCH, bytesPerCall, fmt, makeKeys, median, nsPerCall } from './lib/measure.js';
import { workerThroughput } from './lib/throughput-run.js';

const sab = new SharedArrayBuffer(1 << 16);
const i32 = new Int32Array(sab);
const b64 = new BigInt64Array(sab);
let j = 0;

/** int32 TAT: load, add an interval, CAS. No allocation. */
function int32Step() {
  const k = (j++ & 511) * 2;
  const w = Atomics.load(i32, k);
  Atomics.compareExchange(i32, k, w, (w + 7) | 0);
}

/** 64-bit word [tat:48 | generation:16] handled as BigInt. */
function bigintStep() {
  const k = j++ & 511;
  const w = Atomics.load(b64, k);
  const tat = Number(w >> 16n);
  const gen = w & 0xffffn;
  Atomics.compareExchange(b64, k, w, (BigInt(tat + 7) << 16n) | gen);
}

/** 64-bit word read as two int32 halves (no BigInt on the read), BigInt only for the CAS. */
function halvesStep() {
  const k = j++ & 511;
  const lo = Atomics.load(i32, 2 * k) >>> 0;
  const hi = Atomics.load(i32, 2 * k + 1);
  const v = hi * 2 ** 32 + lo;
  Atomics.compareExchange(b64, k, BigInt(v), BigInt(v + 7));
}

async function wordSteps(quick) {
  const batch = (fn) => () => { for (let i = 0; i < BATCH; i++) fn(); };
  const res = await nsPerCall({
    'Int32Array: load + compareExchange': batch(int32Step),
    'BigInt64Array: load + BigInt math + compareExchange': batch(bigintStep),
    'BigInt64Array CAS, read as two int32 halves': batch(halvesStep),
  }, quick ? { timeMs: 200, warmupMs: 50 } : {});
  const bytes = {
    'Int32Array: load + compareExchange': await bytesPerCall(int32Step),
    'BigInt64Array: load + BigInt math + compareExchange': await bytesPerCall(bigintStep),
    'BigInt64Array CAS, read as two int32 halves': await bytesPerCall(halvesStep),
  };
  return { res, bytes };
}

// ---------------------------------------------------------------------------------------------
// The limiter's two paths. Each traffic pattern has a 32-bit limit and a 64-bit one; the
// constructor picks the width (checked below, so a change of rule cannot silently compare a path
// with itself). `spend` is the cost each key pays once during setup.

const KEYS = 1_000;
const BURST_2_40 = 2 ** 40;
const TRAFFIC = [
  {
    title: 'mostly allowed',
    expectAllowed: true,
    // The same rate on both paths; a burst of 2^40 does not fit 32 bits.
    narrow: { limit: perSecond(5e7, { burst: 5e7 }), text: 'perSecond(50,000,000, { burst: 50,000,000 })' },
    wide: { limit: perSecond(5e7, { burst: BURST_2_40 }), text: 'perSecond(50,000,000, { burst: 2^40 })' },
    spend: () => 1,
  },
  {
    title: 'mostly refused',
    expectAllowed: false,
    // Both spent to the full burst during setup: 1 per hour refills once an hour, 1,000,000 per
    // day one every 86.4 ms, so a key checked every few microseconds is almost always refused.
    narrow: { limit: perHour(1, { burst: 1 }), text: 'perHour(1, { burst: 1 })' },
    wide: { limit: perDay(1e6), text: 'perDay(1,000,000) (burst 1,000,000)' },
    spend: (limit) => limit.burst,
  },
];
const WIDTHS = [['narrow', 32], ['wide', 64]];
const CALLS = ['allow', 'tryAcquire'];

/** Where tryAcquire leaves its Decision, so V8 cannot optimise the object away. */
export let sink;

/** A limiter for `limit` over `keys`, each key charged `spend(limit)` once; throws unless it runs at `width`. */
function build(limit, width, keys, spend, clock) {
  const limiter = new RateLimiter({ limit, maxKeys: 10_000, ...(clock ? { clock } : {}) });
  if (limiter.width !== width || limiter.stats().width !== width) {
    throw new Error(`width suite: ${JSON.stringify(limit)} runs at width ${limiter.width}, expected ${width}`);
  }
  for (const k of keys) limiter.allow(k, spend(limiter.limit));
  return limiter;
}

const rowName = (t, width, call) => `${width}-bit ${call}, ${t.title}`;

/**
 * `bytesPerCall` over 20,000 calls, or over fewer when every run of that length met a garbage
 * collection (a young generation that has not grown yet fills in 20,000 calls of 100 B or more).
 */
async function bytesOf(fn) {
  for (const calls of [20_000, 4_000, 1_000]) {
    const bytes = await bytesPerCall(fn, calls);
    if (!Number.isNaN(bytes)) return { bytes, calls };
  }
  return { bytes: NaN, calls: 0 };
}

async function paths(quick) {
  const keys = makeKeys(KEYS);
  // A clock that never moves: what the table allocates on its own, without performance.now()'s
  // boxed double, on decisions that are all admissions (mostly allowed) or all refusals.
  const constant = { now: () => 1_000 };
  const built = [];
  for (const t of TRAFFIC) {
    for (const [side, width] of WIDTHS) {
      const { limit } = t[side];
      built.push({ t, width, real: build(limit, width, keys, t.spend), frozen: build(limit, width, keys, t.spend, constant) });
    }
  }
  // Both paths read the clock at their own call site (RateLimiter's for 32 bits, WideGcra's for
  // 64). Whatever ran earlier in this process, let both sites see both clock shapes before
  // anything is timed, so neither path is timed with a call site the other does not have.
  // Each limiter's outcome is counted right after its warm-up, which spends what its keys refilled
  // since setup (1,000,000 a day refills about 12 checks a millisecond over the 1,000 keys).
  const allowed = {};
  const tasks = {};
  let at = 0;
  for (const b of built) {
    for (let i = 0; i < 20_000; i++) { b.real.allow(keys[i % KEYS]); b.frozen.allow(keys[i % KEYS]); }
    let n = 0;
    for (let i = 0; i < 10_000; i++) if (b.real.allow(keys[i % KEYS])) n++;
    allowed[`${b.width}:${b.t.title}`] = n / 10_000;
    const lim = b.real;
    tasks[rowName(b.t, b.width, 'allow')] = () => { for (let i = 0; i < BATCH; i++) lim.allow(keys[(at++) % KEYS]); };
    tasks[rowName(b.t, b.width, 'tryAcquire')] = () => { for (let i = 0; i < BATCH; i++) sink = lim.tryAcquire(keys[(at++) % KEYS]); };
  }
  const res = await nsPerCall(tasks, quick ? { timeMs: 200, warmupMs: 50 } : {});

  const bytes = {};
  const frozenBytes = {};
  for (const b of built) {
    const lim = b.real;
    const frozen = b.frozen;
    bytes[rowName(b.t, b.width, 'allow')] = await bytesOf((i) => lim.allow(keys[i % KEYS]));
    bytes[rowName(b.t, b.width, 'tryAcquire')] = await bytesOf((i) => { sink = lim.tryAcquire(keys[i % KEYS]); });
    frozenBytes[rowName(b.t, b.width, 'allow')] = await bytesOf((i) => frozen.allow(keys[i % KEYS]));
    frozenBytes[rowName(b.t, b.width, 'tryAcquire')] = await bytesOf((i) => { sink = frozen.tryAcquire(keys[i % KEYS]); });
    // The constant-clock rows are only "per admitted" or "per refused" check if every check was one.
    for (let i = 0; i < KEYS; i++) {
      if (frozen.allow(keys[i]) !== b.t.expectAllowed) {
        throw new Error(`width suite: constant-clock ${b.width}-bit limiter, ${b.t.title}: a check went the other way`);
      }
    }
  }
  return { res, bytes, frozenBytes, allowed };
}

/** Two workers on distinct keys, mostly allowed, each width in turn (alternating rounds). */
async function twoWorkers(quick) {
  const t = TRAFFIC[0];
  const keySets = [makeKeys(KEYS, 'w0'), makeKeys(KEYS, 'w1')];
  const limiters = WIDTHS.map(([side, width]) => build(t[side].limit, width, keySets.flat(), t.spend));
  const rounds = quick ? 1 : 5;
  const ms = quick ? 200 : 1_000;
  const perSec = WIDTHS.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < limiters.length; i++) perSec[i].push(await workerThroughput(limiters[i].handle, 2, keySets, ms));
  }
  return { rounds, ms, perSec };
}

export async function runWidth({ quick = false } = {}) {
  const steps = await wordSteps(quick);
  const p = await paths(quick);
  const workers = await twoWorkers(quick);

  const lines = ['## Integer width of the state word', '', 'One uncontended read-modify-compare-and-swap, single thread.', ''];
  lines.push('| state word | ns/op median | p25-p75 | bytes/op | vs int32 |', '|---|---:|---:|---:|---:|');
  const base = steps.res['Int32Array: load + compareExchange'].median;
  for (const [name, r] of Object.entries(steps.res)) {
    lines.push(`| ${name} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ${fmt(steps.bytes[name], 1)} | ${fmt(r.median / base, 2)}x |`);
  }
  lines.push('', 'The limiter keeps one int32 TAT whenever the limit fits 32 bits; otherwise it runs the last row ' +
    '(src/gcra-wide.ts): two int32 loads, integer-pair arithmetic, one 64-bit compareExchange.');

  lines.push('', '## Integer width: the limiter\'s 32-bit and 64-bit paths, one thread', '');
  lines.push(`Existing keys (${fmt(KEYS)} keys, 24-character strings), the default clock. Limits:`);
  for (const t of TRAFFIC) {
    lines.push(`- ${t.title}: 32-bit \`${t.narrow.text}\`, 64-bit \`${t.wide.text}\`${t.expectAllowed ? ', every key spent once' : ', every key spent to its full burst'} during setup.`);
  }
  lines.push('', 'Each tinybench iteration makes 1,000 calls; figures are ns per call (median, p25-p75 over samples). ' +
    '"allowed" is the fraction allowed over 10,000 calls counted before timing. "bytes/call" is with the default clock ' +
    '(`performance.now()` boxes a double); "constant clock" is the same limit on a clock that never moves, so that every ' +
    'check is an admission (mostly allowed) or a refusal (mostly refused) and the figure is what the table allocates.', '');
  lines.push('| traffic | call | width | allowed | ns/call median | p25-p75 | bytes/call | bytes/call, constant clock | 64-bit / 32-bit |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|');
  const shorter = new Set();
  const bytesCell = (b) => {
    if (b.calls === 20_000) return fmt(b.bytes, 1);
    shorter.add(b.calls);
    return `${fmt(b.bytes, 1)}*`;
  };
  const ratios = [];
  for (const t of TRAFFIC) {
    for (const call of CALLS) {
      for (const [, width] of WIDTHS) {
        const name = rowName(t, width, call);
        const r = p.res[name];
        let ratio = '';
        if (width === 64) {
          const x = r.median / p.res[rowName(t, 32, call)].median;
          ratios.push({ what: `${call}, ${t.title}`, x });
          ratio = `**${fmt(x, 2)}x**`;
        }
        lines.push(`| ${t.title} | ${call} | ${width} | ${fmt(p.allowed[`${width}:${t.title}`], 3)} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ` +
          `${bytesCell(p.bytes[name])} | ${bytesCell(p.frozenBytes[name])} | ${ratio} |`);
      }
    }
  }
  if (shorter.size > 0) {
    lines.push('', `Bytes are averaged over 20,000 calls per run, except those marked *: over ${[...shorter].map((c) => fmt(c)).join(' or ')} ` +
      'calls, because every run of 20,000 met a garbage collection.');
  }
  const constantBytes = (traffic, width) => p.frozenBytes[rowName(traffic, width, 'allow')];
  const admitted64 = constantBytes(TRAFFIC[0], 64).bytes;
  const refused64 = constantBytes(TRAFFIC[1], 64).bytes;
  const admitted32 = constantBytes(TRAFFIC[0], 32).bytes;
  const refused32 = constantBytes(TRAFFIC[1], 32).bytes;
  lines.push('', `On a constant clock, \`allow\` allocates ${fmt(admitted64, 1)} B per admitted check and ${fmt(refused64, 1)} B per refused check ` +
    `on the 64-bit path (32-bit: ${fmt(admitted32, 1)} B and ${fmt(refused32, 1)} B). ` +
    '`tryAcquire` allocates its `Decision` object on both paths.');

  const [narrowRuns, wideRuns] = workers.perSec;
  const workerRatio = median(wideRuns) / median(narrowRuns);
  lines.push('', '## Integer width: two workers on distinct keys', '');
  lines.push(`Each of 2 workers checks its own ${fmt(KEYS)} existing keys with \`allow\` in a loop for ${fmt(workers.ms / 1000, 1)} s, ` +
    `mostly allowed (the limits above); ${workers.rounds} round(s) per width, alternating.`, '');
  lines.push('| width | limit | checks/s, 2 workers (median) | all rounds |', '|---:|---|---:|---|');
  WIDTHS.forEach(([side, width], i) => {
    const runs = workers.perSec[i];
    lines.push(`| ${width} | \`${TRAFFIC[0][side].text}\` | ${fmt(median(runs))} | ${runs.map((x) => fmt(x / 1e6, 2)).join(', ')} M |`);
  });
  lines.push('', `On two workers the 64-bit path makes **${fmt(workerRatio, 2)}x** the checks per second of the 32-bit path.`);

  const worst = ratios.reduce((a, b) => (b.x > a.x ? b : a));
  const bytes64 = Math.max(admitted64, refused64);
  const bytes64Calls = Math.min(constantBytes(TRAFFIC[0], 64).calls, constantBytes(TRAFFIC[1], 64).calls);
  const verdict = (ok) => (ok ? 'met' : '**missed**');
  lines.push('', '## Integer width: targets', '');
  lines.push('| target | measured | |', '|---|---:|---|');
  lines.push(`| 64-bit path at most 1.5x the 32-bit path's ns/check (the largest of the ${ratios.length} ratios above: ${worst.what}) | ${fmt(worst.x, 2)}x | ${verdict(worst.x <= 1.5)} |`);
  lines.push(`| zero bytes per check on the 64-bit path (\`allow\`, constant clock, under 1 B averaged over ${fmt(bytes64Calls)} calls; the larger of admitted and refused) | ${fmt(bytes64, 1)} B | ${verdict(bytes64 < 1)} |`);
  return { markdown: lines.join('\n'), figures: { steps, paths: p, workers, worst, bytes64, workerRatio } };
}
