// Two 32-bit GCRA limits on one key, decided without a lock (LockFreeEngine.#allowGcra: both
// states snapshot, the lastSec bound, one compareExchange per limit, a limit taken back when a
// later one lost its race and now refuses). Thread 1 inserts the key in its set-up, 20 s before
// the explored part starts (set-up reads START_MS; the first explored reading is 20 s later): the
// key's lastSec stamp is then older than the per-second limit's staleness rule (13 s), so the
// stamp's load and raise decide whether the next thread sees the spends. Thread 0 first decides
// another key, so that its latest reading names a second the new key's SlotRef must not be taken
// to know. Readings sit in second -1, where every integer is a real second (the lastSec 'none' bug).
// Checked: admissions and refusals against both GCRA models together (each limit's readings
// floored to its tick), with the set-up's admission first; one live copy per key.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const perSecond = { permits: 2, periodMs: 1000, burst: 2 };
const perMinute = { permits: 3, periodMs: 60_000, burst: 3 };
const START_MS = -20_500;
const JUMP_MS = 20_000;
const SHIFT_MS = 2 ** 16;

// The usual moves, from START_MS + JUMP_MS on: the set-up's readings are START_MS, every explored
// one is at least 20 s later (no move goes back 20 s).
const moves = timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 500 }).moves;
const time = { startMs: START_MS, moves: moves.map((m) => ({ name: m.name, to: (now) => m.to(now === START_MS ? now + JUMP_MS : now) })) };

export default {
  name: 'multi-limit',
  what: 'LockFreeEngine with two GCRA limits on one key: snapshots, lastSec bound, per-limit commits and undo',
  time,
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perSecond(2), lib.perMinute(3)], maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow j', () => rl.allow('j'));
      ctx.call('allow k', () => rl.allow('k'));
      ctx.call('allow k', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS: the key and its stamp are old once the clock jumps
      ctx.ready();
      ctx.call('allow k', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    // Each limit floors readings to its own tick: 10 ns per second, 1 us per minute.
    const model = allOf(tickEarly(gcraModel(perSecond, { refusalSlackMs: 1e-5 }), 1e-5), tickEarly(gcraModel(perMinute, { refusalSlackMs: 1e-3 }), 1e-3));
    // The set-up's admission of k comes first, at START_MS.
    const setupCall = { label: 'set-up allow k', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 1, index: -1 };
    // linearizable() judges only readings >= 0: every reading moves 2^16 ms later (GCRA does not
    // depend on where time 0 is; the shift rounds a reading by at most 2^-37 ms).
    const calls = [setupCall, ...callsOf(exec)].map((c) => ({ ...c, readings: c.readings.map((r) => r + SHIFT_MS) }));
    return liveCopies(exec.buffers[0], lib, ['j', 'k'])
      ?? linearizable(calls, model, (c) => ({ key: c.label.endsWith('j') ? 'j' : 'k', cost: 1, admitted: c.result === true }));
  },
};
