// LocalTier's refusal cache (src/redis/local-tier.ts, local-tier-slot.ts), no Redis: thread 1
// records that key 'k' is refused until 5100.7 ms (refuseUntil, which inserts the key's slot and
// bumps the inserts count); thread 0 asks refusedFor('k') twice (its first answer may record the
// key absent in its own cache, and its second must not trust that record after an insert); thread
// 2 sweeps (a slot whose refusal has ended is idle and goes) and then asks too. The clock starts at
// 5000.5 ms; an interval-edge move lands on 5100 ms, where the refusal (floored to the ms) ends.
// Checked, for every refusedFor answer at reading r (the contract in local-tier.ts):
// - never refused at or after the recorded end: a positive answer needs a refuseUntil that began
//   before the answer ended, and r + answer <= floor(untilMs);
// - a refusal recorded is answered: after a refuseUntil that returned true, an answer that begins
//   later at r < floor(untilMs) is at least floor(untilMs) - r (unless the clock had already
//   reached floor(untilMs) before it began and then stepped back: the refusal may be gone).
import { callsOf } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';

const UNTIL_MS = 5100.7;
const END_MS = Math.floor(UNTIL_MS);

export default {
  name: 'local-tier',
  what: 'LocalTier refuseUntil / refusedFor (absent-key record, memo, ctrl check) racing sweep',
  time: timeMoves({ startMs: 5000.5, tickMs: 0.25, intervalMs: 100 }),
  setup(lib) {
    const tier = lib.LocalTier.create({ maxKeys: 1, hashSeed: 7 });
    return { buffers: [tier.handle.table], data: { handle: tier.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const tier = lib.LocalTier.attach(handle);
      ctx.ready();
      ctx.call('refusedFor', () => tier.refusedFor('k'));
      ctx.call('refusedFor', () => tier.refusedFor('k'));
    },
    (ctx, { handle }, lib) => {
      const tier = lib.LocalTier.attach(handle);
      ctx.ready();
      ctx.call('refuseUntil', () => tier.refuseUntil('k', UNTIL_MS));
    },
    (ctx, { handle }, lib) => {
      const tier = lib.LocalTier.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => tier.sweep());
      ctx.call('refusedFor', () => tier.refusedFor('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['k']);
    if (copies !== null) return copies;
    const calls = callsOf(exec);
    const writes = calls.filter((c) => c.label === 'refuseUntil');
    const readings = exec.trace.filter((e) => e.kind === 'clock');
    const clockBefore = (step) => Math.max(-Infinity, ...readings.filter((e) => e.step < step).map((e) => e.result));
    for (const c of calls.filter((x) => x.label === 'refusedFor')) {
      const r = c.readings[0];
      const name = `T${c.thread}.${c.index} refusedFor at ${r} ms -> ${c.result}`;
      if (c.result > 0) {
        const began = writes.filter((d) => d.firstStep < c.lastStep);
        if (began.length === 0) return `${name}: refused, and no refusal was being recorded`;
        if (r + c.result > END_MS + 1e-9) return `${name}: refused past the recorded end (${END_MS} ms)`;
      }
      for (const d of writes) {
        if (d.result !== true || !(d.lastStep < c.firstStep)) continue;
        if (r >= END_MS || clockBefore(c.firstStep) >= END_MS) continue;
        if (c.result < END_MS - r - 1e-9) return `${name}: after T${d.thread}.${d.index} recorded a refusal until ${UNTIL_MS} ms`;
      }
    }
    return null;
  },
};
