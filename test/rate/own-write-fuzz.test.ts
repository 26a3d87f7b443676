// Gcra32's admissions from a thread's own write (docs/design.md section 2, "A thread's own write"),
// attacked by a seeded differential: several instances on one handle (threads) against one limiter (the
// sequential model), with slot reuse (small maxKeys, forceHash, sweeps), big clock jumps
// (43 s, exactly 2^32 ticks, staleSec), negative readings, costs 0..burst+2, reservations and
// cancels. With `hooks`, other "threads" run whole operations *inside* an outer operation:
// - at the outer's first clock reading, if it has touched no tat word yet (the own path reads the
//   clock first): the nested operations may also move the clock;
// - just before any Atomics.load / compareExchange of a tat word by the outer (its snapshot,
//   its CAS, its validation load, its lookup), without moving the clock once the outer read it.
// Every such point comes before the outer's linearisation point, so the model runs the nested
// operations first, then the outer's: every answer must be equal.
import { describe, expect, it } from 'vitest';
import { perSecond, RateLimiter, RateLimitTimeoutError, TableFullError, type Limit, type Reservation } from '../../src/index.js';
import { BUSY, DEAD, H_RESET_MARKS, H_SLOT_WORDS, HEADER_WORDS, MARK_WORDS, RESET_MARKS, S_CTRL, S_LAST_SEC, S_TAT } from '../../src/table/layout.js';
import { gcraParams } from '../../src/math/gcra.js';
import { withAtomicsHooks, type AtomicsHooks } from '../helpers/atomics-spy.js';
import { mulberry32 } from '../helpers/random.js';
import { slotBaseOf } from '../helpers/slots.js';
import { soakOr } from '../helpers/soak.js';

type Held = { got: Reservation; want: Reservation; owner: number };

function run(seed: number, limit: Limit, startMs: number, hooks: boolean, steps: number) {
  const rand = mulberry32(seed);
  const p = gcraParams(limit);
  expect(p.width).toBe(32);
  const wrapMs = (2 ** 32 * p.tickPs) / 1e9; // 2^32 ticks in ms
  let t = startMs;
  const N = 3;
  let outer = -1; // instance running the outer operation
  let nested = false;
  let tatTouched = false;
  let clockRead = false;
  let structural = false;
  const modelClock = { now: (): number => t };
  const mk = (i: number) => ({
    now: (): number => {
      if (hooks && !nested && outer === i && !tatTouched && !clockRead && !structural && noBusy()) maybeNest(true);
      if (!nested && outer === i) clockRead = true;
      return t;
    },
  });
  const opts = { limit, maxKeys: 4, forceHash: 777, cacheSize: 64, slotsPerKey: 1.25 };
  const a = new RateLimiter({ ...opts, clock: mk(0) });
  const threads = [a, RateLimiter.attach(a.handle, { clock: mk(1) }), RateLimiter.attach(a.handle, { clock: mk(2) })];
  const model = new RateLimiter({ ...opts, clock: modelClock });
  const table = a.handle.table;
  const w = new Int32Array(table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const isWord = (i: number, off: number): boolean => i >= HEADER_WORDS && (i - HEADER_WORDS) % slotWords === off;
  // The reset marks' guard words (reset-marks.ts, MarkGuard): a give-back holds its slot's guard
  // around its write of tat. Nested operations wait there for the guard's take-over age (30 s of
  // real time) while the outer holds it, as threads would behind a stalled holder (found: one
  // seed took 30 s). That stall is mark-guard.test.ts's and the explorer's; no nesting inside it.
  const marksFrom = w[H_RESET_MARKS] as number;
  const isGuard = (i: number): boolean => i >= marksFrom && i < marksFrom + RESET_MARKS * MARK_WORDS && (i - marksFrom) % MARK_WORDS === 2;
  let guarded = false;
  // Hooks only while the outer's key is live and no insert is under way: an insert that finds
  // its stripe full reclaims slot by slot (several linearisation points), not what is attacked here.
  let outerKey = '';
  function noBusy(): boolean {
    if (slotBaseOf(table, outerKey) < 0) return false;
    for (let b = HEADER_WORDS; b + slotWords <= w.length; b += slotWords) if (((w[b + S_CTRL] as number) & 3) === BUSY) return false;
    return true;
  }
  const keys = Array.from({ length: 12 }, (_, k) => `k${k}`);
  const held: Held[] = [];
  const seen = { allowed: 0, refused: 0, full: 0, reserved: 0, cancelled: 0, swept: 0, nested: 0, jumps: 0 };
  const log: string[] = [];

  const costOf = (): number => {
    const r = rand();
    if (r < 0.6) return 1;
    if (r < 0.7) return 0;
    if (r < 0.8) return p.burst + 1 + Math.floor(rand() * 2);
    if (r < 0.9) return p.burst;
    return 1 + Math.floor(rand() * Math.min(p.burst, 1e9));
  };
  const norm = (f: () => unknown): unknown => {
    try {
      const v = f();
      if (v && typeof v === 'object' && 'delayMs' in (v as object)) return { delayMs: (v as Reservation).delayMs };
      return v;
    } catch (e) {
      if (e instanceof RateLimitTimeoutError || e instanceof TableFullError) return { error: e.name, message: e.message };
      throw e;
    }
  };
  const where = (what: string): string => `seed ${seed} t=${t} ${what}\n${log.slice(-25).join('\n')}`;

  function advance(): void {
    const r = rand();
    const sec = Math.floor(t / 1000);
    if (r < 0.35) t += rand() * 30;
    // To / just before a boundary; never back (a reading within 0.01 ms of the boundary would
    // step back: then the instances and the model, which read different times, may differ).
    else if (r < 0.5) t = Math.max(t, (sec + 1) * 1000 - (rand() < 0.5 ? 0 : rand() * 0.01));
    else if (r < 0.6) t = (sec + 1) * 1000 + rand() * 0.01;
    else if (r < 0.7) t += 700;
    else if (r < 0.78) { t += wrapMs; seen.jumps++; }
    else if (r < 0.84) { t += 43_000; seen.jumps++; }
    else if (r < 0.9) { t += (p.staleSec + 1) * 1000; seen.jumps++; }
    else if (r < 0.95) t += rand() * 3 * p.toleranceTicks * p.tickPs / 1e9;
    else t += 0; // a repeated reading
    log.push(`${nested ? '  nested ' : ''}advance -> ${t}`);
  }

  // One operation by thread `i` (not the outer one when nested), checked against the model.
  function op(i: number, allowClock: boolean): void {
    const th = threads[i] as RateLimiter;
    const r = rand();
    const key = keys[Math.floor(rand() * (rand() < 0.6 ? 2 : keys.length))] as string;
    if (!nested) outerKey = key;
    if (r < 0.55) {
      const cost = costOf();
      const useAllow = rand() < 0.3;
      log.push(`${nested ? '  nested ' : ''}T${i} begins ${useAllow ? 'allow' : 'try'}(${key}, ${cost}) at ${t}`);
      const got = useAllow ? th.allow(key, cost) : th.tryAcquire(key, cost);
      const want = useAllow ? model.allow(key, cost) : model.tryAcquire(key, cost);
      log.push(`${nested ? '  nested ' : ''}T${i} ${useAllow ? 'allow' : 'try'}(${key}, ${cost}) -> ${JSON.stringify(got)}`);
      expect(got, where(`T${i} ${key} cost ${cost}`)).toEqual(want);
      const allowed = typeof got === 'boolean' ? got : got.allowed;
      if (typeof got !== 'boolean' && got.reason === 'table-full') seen.full++;
      else if (allowed) seen.allowed++;
      else seen.refused++;
    } else if (r < 0.7) {
      const cost = rand() < 0.7 ? 1 : costOf();
      const maxWaitMs = rand() < 0.5 ? 300 : rand() < 0.5 ? Infinity : rand() * 5000;
      log.push(`${nested ? '  nested ' : ''}T${i} begins reserve(${key}, ${cost}) at ${t}`);
      let g: Reservation | null = null;
      let m: Reservation | null = null;
      const got = norm(() => (g = th.reserve(key, { cost, maxWaitMs })));
      const want = norm(() => (m = model.reserve(key, { cost, maxWaitMs })));
      log.push(`${nested ? '  nested ' : ''}T${i} reserve(${key}, ${cost}, ${maxWaitMs}) -> ${JSON.stringify(got)}`);
      expect(got, where(`T${i} reserve ${key} cost ${cost}`)).toEqual(want);
      if (g && m) {
        held.push({ got: g, want: m, owner: i });
        seen.reserved++;
      }
    } else if (r < 0.8) {
      const mine = held.filter((h) => h.owner === i);
      if (mine.length === 0) return;
      const h = mine[Math.floor(rand() * mine.length)] as Held;
      held.splice(held.indexOf(h), 1);
      log.push(`${nested ? '  nested ' : ''}T${i} begins cancel(${h.got.key}) at ${t}`);
      const got = h.got.cancel();
      const want = h.want.cancel();
      log.push(`${nested ? '  nested ' : ''}T${i} cancel(${h.got.key}) -> ${got}`);
      expect(got, where(`T${i} cancel ${h.got.key}`)).toBe(want);
      if (got) seen.cancelled++;
    } else if (r < 0.9) {
      // A whole sweep has a linearisation point per slot: no hooks inside an outer one.
      const saved = outer;
      if (!nested) outer = -1;
      let got: number;
      try {
        got = th.sweep();
      } finally {
        outer = saved;
      }
      const want = model.sweep();
      log.push(`${nested ? '  nested ' : ''}T${i} sweep -> ${got}`);
      expect(got, where(`T${i} sweep`)).toBe(want);
      seen.swept += got;
    } else if (allowClock) {
      advance();
    }
  }

  function maybeNest(allowClock: boolean): void {
    if (guarded || rand() >= 0.35) return;
    nested = true;
    try {
      const n = 1 + Math.floor(rand() * 3);
      for (let k = 0; k < n; k++) {
        let i = Math.floor(rand() * (N - 1));
        if (i >= outer) i++;
        op(i, allowClock);
        seen.nested++;
      }
    } finally {
      nested = false;
    }
  }

  const nest: AtomicsHooks = {
    load(arr, i) {
      if (!nested && outer >= 0 && arr.buffer === table && isWord(i, S_TAT)) {
        if (!structural && noBusy()) maybeNest(!clockRead);
        tatTouched = true;
      }
    },
    cas(arr, i, _e, v) {
      if (!nested && outer >= 0 && arr.buffer === table) {
        if (isGuard(i)) guarded = v !== 0; // taken (a token), or let go (FREE)
        else if (isWord(i, S_TAT)) {
          if (!structural && noBusy()) maybeNest(!clockRead);
          tatTouched = true;
          if (v === DEAD) structural = true;
        } else if (isWord(i, S_CTRL)) structural = true;
        // A raise of lastSec before the CAS is visible to others at once (a known conservative
        // corner, docs/design.md section 2): nested calls after it are not "before" the outer.
        else if (isWord(i, S_LAST_SEC)) structural = true;
      }
    },
  };

  // The hooks cover the steps only: not the final probes below, nor the next run.
  withAtomicsHooks(hooks ? nest : {}, () => {
    for (let step = 0; step < steps; step++) {
      const r = rand();
      if (r < 0.12) {
        advance();
        continue;
      }
      const i = Math.floor(rand() * N);
      const isSweep = r > 0.97;
      outer = isSweep ? -1 : i; // no hooks inside a whole sweep (several linearisation points)
      tatTouched = false;
      clockRead = false;
      structural = false;
      guarded = false;
      try {
        op(i, false);
      } finally {
        outer = -1;
      }
    }
  });
  // Final states: a probe of every key on every thread equals the model's.
  for (const key of keys) {
    for (const th of threads) expect(th.tryAcquire(key, 0), where(`final probe ${key}`)).toEqual(model.tryAcquire(key, 0));
  }
  return seen;
}

/**
 * Seeds per limit and mode, and steps per seed (4 x 1,500 under `npm test`, 12 x 1,500 under
 * `npm run test:soak`; the attack that found nothing ran 150 x 3,000).
 */
const SEEDS = soakOr(4, 12);
const STEPS = 1_500;

const LIMITS: [string, Limit, number][] = [
  ['perSecond(50, burst 5), 10 ns', perSecond(50, { burst: 5 }), 10_000.125],
  ['perSecond(5e7, burst 5e7), 10 ns, 2-tick interval', perSecond(5e7, { burst: 5e7 }), 2_000_000.5],
  ['perSecond(1000, burst 2), 10 ns', perSecond(1000, { burst: 2 }), 5_000_100],
  ['10 per hour, 10 us ticks', { permits: 10, periodMs: 3_600_000, burst: 10 }, 77_777.7],
  ['1 per day burst 3, 1 ms ticks', { permits: 1, periodMs: 86_400_000, burst: 3 }, 123_456],
  ['perSecond(50, burst 5), negative readings', perSecond(50, { burst: 5 }), -100_000.5],
  ['perSecond(10), near 2^32 s', perSecond(10), 2 ** 32 * 1000 - 30_000],
];

describe('admissions from a thread\'s own write: differential with slot reuse and big clock jumps', () => {
  for (const hooks of [false, true]) {
    it.each(LIMITS)(`%s (${hooks ? 'nested operations inside each call' : 'sequential calls'})`, (_, limit, start) => {
      const total = { allowed: 0, refused: 0, full: 0, reserved: 0, cancelled: 0, swept: 0, nested: 0, jumps: 0 };
      for (let seed = 1; seed <= SEEDS; seed++) {
        const s = run(seed * 7919 + (hooks ? 1 : 0), limit, start, hooks, STEPS);
        for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += s[k];
      }
      expect(total.allowed).toBeGreaterThan(50);
      expect(total.refused).toBeGreaterThan(20);
      expect(total.swept).toBeGreaterThan(5);
      if (hooks) expect(total.nested).toBeGreaterThan(100);
    });
  }
});
