// What the width-32 one-limit scenarios share (gcra-32-decide, key-get, key-controls): the limit,
// the clock moves and the set-up, a four-key table with a fixed hash seed.
import { timeMoves } from './common.mjs';

/** 2 per second, burst 2, as the model sees it. */
export const gcra32Limit = { permits: 2, periodMs: 1000, burst: 2 };

/** Stay, a tick, an interval or second edge, a 32-bit wrap of the ticks, a step back. */
export const gcra32Time = timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 500, wrapMs: 2 ** 31 * 1e-5 });

/** The table every thread attaches to. */
export function gcra32Setup(lib) {
  const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 4, hashSeed: 7 });
  return { buffers: [rl.handle.table], data: { handle: rl.handle } };
}
