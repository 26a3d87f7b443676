// The coarse clock (src/time/coarse-clock.ts): publish() and CoarseClock.now(). The updater thread
// normally runs publish() from its source in a worker of its own; here thread 0 plays it, through
// the one door the build leaves open: a CoarseClock instance publishes performance.now() on its
// 64th reading, so the set-up reads its instance 63 times and its first explored reading is a
// publish (then it reads once more). Thread 1 is a reader whose second reading publishes too (a
// busy reader moves the clock itself); thread 2 only reads. The clock word starts at 1000.5 ms,
// resolution 0.01 ms; a 'stop' move jumps 3 * 2^30 units ahead (a process stopped for about 9
// hours: the word is then more than 2^31 units behind, where a 32-bit comparison reads it as ahead).
// Checked: no reading goes back (within a thread, and across calls in real-time order); a reading
// that starts after a publish of time X ended reads at least X rounded down to the resolution (the
// clock does not freeze); no reading is ahead of the latest time the scenario's clock reached (to
// float rounding: units times the resolution can land an ulp above the reading it came from).
import { callsOf } from '../models.mjs';
import { timeMoves } from './common.mjs';

export const RES_MS = 0.01;
export const START_MS = 1000.5;
export const EPOCH_UNITS = 2 ** 30;
export const READS_PER_CHECK = 64;
const CLOCK_COARSE = 3; // src/time/clock.ts: the header's clock kind of a coarseClock()
const WORDS = ['word', 'epoch[0]', 'epoch[1]', 'epoch[2]', 'epoch[3]', 'wake'];

const time = timeMoves({ startMs: START_MS, tickMs: RES_MS, intervalMs: 1 });
time.moves.splice(4, 0, { name: 'stop', to: (now) => now + 3 * EPOCH_UNITS * RES_MS });

/** A fresh CoarseClock of this build over `buffer`, read `reads` times (set-up). */
export function clockOf(rl, buffer, reads) {
  const r = rl.reserve('k', { cost: 0 }); // the one public object that carries the limiter's clock
  const c = new r.clock.constructor(buffer);
  for (let i = 0; i < reads; i++) c.now();
  return c;
}

export default {
  name: 'coarse-clock',
  what: 'coarse clock publish (updater and busy reader) racing readers, across a stop of 3 * 2^30 units',
  time,
  setup: coarseSetup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      const a = clockOf(rl, handle.clock, READS_PER_CHECK - 1);
      ctx.ready();
      ctx.call('publish', () => a.now());
      ctx.call('read', () => a.now());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      const c = clockOf(rl, handle.clock, READS_PER_CHECK - 2);
      ctx.ready();
      ctx.call('read', () => c.now());
      ctx.call('publish', () => c.now());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      const c = clockOf(rl, handle.clock, 0);
      ctx.ready();
      ctx.call('read', () => c.now());
      ctx.call('read', () => c.now());
    },
  ],
  names: coarseNames,
  check: coarseCheck,
};

/** A table on a coarse clock of its own buffer, the clock word at START_MS. */
export function coarseSetup(lib) {
  const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 1, hashSeed: 7 });
  const table = rl.handle.table;
  new Int32Array(table)[lib.layout.H_CLOCK_KIND] = CLOCK_COARSE; // not shared yet: a plain write
  const clock = new SharedArrayBuffer(32);
  new Float64Array(clock, 24, 1)[0] = RES_MS;
  const w = new Int32Array(clock);
  const units = Math.floor(START_MS / RES_MS);
  w[1 + (Math.floor(units / EPOCH_UNITS) & 3)] = Math.floor(units / EPOCH_UNITS);
  w[0] = units | 0;
  return { buffers: [clock, table], data: { handle: { ...rl.handle, clock } } };
}

/** Readings never go back, never freeze after a publish, never run ahead of the clock. */
export function coarseCheck(exec) {
  const calls = callsOf(exec).filter((c) => c.firstStep >= 0);
  const latest = Math.max(START_MS, ...exec.trace.filter((e) => e.kind === 'clock').map((e) => e.result));
  const name = (c) => `T${c.thread}.${c.index}`;
  for (const c of calls) {
    // units * resolution may round an ulp or so above the reading it came from
    if (c.result > latest * (1 + 2 ** -50)) return `${name(c)} read ${c.result} ms, ahead of every time the clock reached (${latest})`;
    for (const d of calls) {
      if (!(d.lastStep < c.firstStep) || c.result >= d.result) continue;
      return `${name(c)} read ${c.result} ms after ${name(d)} read ${d.result} ms: the clock went back`;
    }
    for (const d of calls) {
      if (d.readings.length === 0 || !(d.lastStep < c.firstStep || d === c)) continue;
      const floor = Math.floor(d.readings[0] / RES_MS) * RES_MS;
      if (c.result < floor) return `${name(c)} read ${c.result} ms after ${name(d)} published ${d.readings[0]} ms: the clock froze`;
    }
  }
  return null;
}

/** The clock buffer's words by name. */
export function coarseNames() {
  return (buf, byte) => (buf === 0 ? WORDS[byte >> 2] ?? `byte ${byte}` : `table byte ${byte}`);
}
