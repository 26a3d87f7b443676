// Two keys longer than a slot holds (28 bytes: 24 in the slot, the rest in the slot's heap record)
// that differ only in their last byte and have one hash (forceHash): two threads insert them at
// once. Their inserts race on the chain (claim, re-scan, cancel, publish) and on the key heap
// (each new record is a compareExchange on the heap's top), and each compares the other's tail
// (the hash, the length and the slot's 24 bytes are alike). Checked: the
// admissions against the exact model, one live copy of each key, each read back in full.
import { gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 1000, burst: 1 };
const HEAD = 'tenant-0123456789abcdef/'; // 24 bytes
const K1 = `${HEAD}key1`;
const K2 = `${HEAD}key2`;

export default {
  name: 'long-key-insert',
  what: 'Table insert of long keys (heap records, tails compared) racing on one chain, then Gcra32 decide',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 1000 }),
  setup(lib) {
    // 256 keys: a table large enough to keep long keys' tails in a key heap (INLINE_ALL_BYTES).
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxKeys: 256, forceHash: 7 });
    return { buffers: [rl.handle.table, rl.handle.keys], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow(K1));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow(K2));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => ({ key: c.thread === 1 ? 'k2' : 'k1', cost: 1, admitted: c.result === true });
    return liveCopies(exec.buffers[0], lib, [K1, K2], exec.buffers[1]) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }), outcome);
  },
};
