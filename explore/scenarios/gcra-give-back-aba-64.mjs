// gcra-give-back-aba on the width-64 one-limit path (WideGcra): the same limit, 1 a second, with
// maxBlockMs of 30 days, which its 32-bit word cannot hold. The same race, the same check.
import aba from './gcra-give-back-aba.mjs';

export default {
  ...aba,
  name: 'gcra-give-back-aba-64',
  what: `${aba.what}, on a 64-bit word`,
  setup: (lib) => {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxBlockMs: 30 * 86_400_000, maxKeys: 4, hashSeed: 7 });
    if (rl.stats().width !== 64) throw new Error('gcra-give-back-aba-64: the limit no longer takes the 64-bit path');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
};
