// A reservation cancelled while another thread blocks its key and then reserves (width-64
// one-limit path: WideGcra's REFUND and BLOCK modes, and the slot's reset mark). 1 a second, burst
// 1: thread 0's set-up admits the key and reserves (the key then owes 2 s); thread 1 blocks the key
// for 1.5 s, shorter than what it owes, and reserves. The property: nothing decided after the block
// acts before the block's end (its latest reading plus 1,500 ms). A block that wrote nothing on a
// key owing longer let a refund that had read the word before it land after it (found by an
// attack; the block now always changes the word).
import { callsOf } from '../models.mjs';
import { tableNames, timeMoves } from './common.mjs';

export default {
  name: 'reserve-block-64',
  what: 'WideGcra reserve and cancel racing a block shorter than the key\'s debt, then a reservation',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 1000, backMs: [] }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxBlockMs: 30 * 86_400_000, maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k');
      const r = rl.reserve('k', { maxWaitMs: 5000 });
      ctx.ready();
      ctx.call('cancel', () => r.cancel());
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('block', () => { rl.block('k', 1500); return true; });
      ctx.call('reserve', () => {
        try {
          return { actAtMs: rl.reserve('k', { maxWaitMs: 5000 }).actAtMs };
        } catch {
          return null; // too long a wait: nothing counted
        }
      });
    },
  ],
  names: tableNames,
  check(exec) {
    const calls = callsOf(exec).filter((c) => c.thread === 1);
    const block = calls.find((c) => c.label === 'block');
    const from = Math.max(...block.readings.filter(Number.isFinite));
    for (const c of calls) {
      if (c.label === 'reserve' && c.result && c.result.actAtMs < from + 1500) {
        return `over-admission: a reservation decided after block('k', 1500) at ${from} acts at ${c.result.actAtMs}`;
      }
    }
    return null;
  },
};
