// The coarse clock's publish stalled between its check and its writes: thread 0 publishes a
// reading one unit ahead and may stop before it writes its epoch's slot; thread 1 publishes after
// a stop of four epochs (2^32 units: the new epoch takes the slot of the old one); thread 0 then
// reads again. A publish that then wrote its old epoch into that slot would put every reading four
// epochs back. Checked as in coarse-clock.mjs: no reading goes back, freezes, or runs ahead.
import { clockOf, coarseCheck, coarseNames, coarseSetup, EPOCH_UNITS, READS_PER_CHECK, RES_MS, START_MS } from './coarse-clock.mjs';

export default {
  name: 'coarse-clock-stall',
  what: 'coarse clock publish stopped between its check and its slot write, across four epochs',
  time: {
    startMs: START_MS,
    moves: [
      { name: 'stay', to: (now) => now },
      { name: 'unit', to: (now) => now + RES_MS },
      { name: 'stop 4 epochs', to: (now) => now + 4 * EPOCH_UNITS * RES_MS },
    ],
  },
  bounds: { ci: { preemptions: 2, timeMoves: 2, staleReads: 0 }, deep: { preemptions: 3, timeMoves: 3, staleReads: 1 } },
  setup: coarseSetup,
  threads: [
    (ctx, { handle }, lib) => {
      const a = clockOf(lib.RateLimiter.attach(handle), handle.clock, READS_PER_CHECK - 1);
      ctx.ready();
      ctx.call('publish', () => a.now());
      ctx.call('read', () => a.now());
    },
    (ctx, { handle }, lib) => {
      const b = clockOf(lib.RateLimiter.attach(handle), handle.clock, READS_PER_CHECK - 1);
      ctx.ready();
      ctx.call('publish', () => b.now());
    },
  ],
  names: coarseNames,
  check: coarseCheck,
};
