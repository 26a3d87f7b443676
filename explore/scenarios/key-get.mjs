// get(key) (rate/rate-limiter.ts: a lookup that never inserts, SlotIndex.peek, then a probe of
// cost 0 at the key's slot) against decisions and a sweep on the width-32 one-limit path. The key
// holds one admission from the set-up; thread 0 reads it twice and reads a key nobody spends;
// thread 1 spends it twice; thread 2 sweeps (it may reclaim the key once idle, under a read).
// Checked: the admissions, refusals and every remaining a get reported against the exact model
// (a get is a probe: that many pass at its reading, one more does not, and nothing changes); a
// get that found no state only after a sweep reclaimed the key; no get ever inserts a key.
import { callsOf, gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames } from './common.mjs';
import { gcra32Limit, gcra32Setup, gcra32Time } from './_gcra32.mjs';

const limit = gcra32Limit;

export default {
  name: 'key-get',
  what: 'get: a lookup that never inserts and a probe, against decisions and a sweep reclaiming the key',
  time: gcra32Time,
  // A third of the usual CI budget keeps npm run explore within its 3 minutes (complete to cost 1
  // in 3 s here); the deep run goes further.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup: gcra32Setup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('get', () => rl.get('k'));
      ctx.call('get c', () => rl.get('c'));
      ctx.call('get', () => rl.get('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['k', 'c']);
    if (copies !== null) return copies;
    for (const c of callsOf(exec)) {
      if (c.label === 'get c' && c.result !== null) return `get('c') reported ${JSON.stringify(c.result)} for a key nobody spent (expected null)`;
    }
    if (countLive(exec.buffers[0], lib, 'c') > 0) return "get('c') inserted the key";
    // A get that found no state for 'k' read no clock, so the model cannot place it; the key can
    // only have left the table by a sweep that reclaimed it (idle: fresh), started before the get ended.
    const calls = callsOf(exec);
    for (const c of calls) {
      if (c.label !== 'get' || c.result !== null) continue;
      if (!calls.some((s) => s.label === 'sweep' && s.result > 0 && s.firstStep < c.lastStep)) return `get('k') found no state at steps ${c.firstStep}-${c.lastStep}, and no sweep had reclaimed it`;
    }
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'get' && c.result !== null) return { key: 'k', cost: 0, remaining: c.result.remaining };
      return null;
    };
    return gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }), outcome);
  },
};

/** Live slots of `buffer` whose key is `key` (a short key: its bytes are in the slot). */
function countLive(buffer, lib, key) {
  const L = lib.layout;
  const w = new Int32Array(buffer);
  const bytes = new Uint8Array(buffer);
  const slots = w[L.H_STRIPES] * w[L.H_SLOTS_PER_STRIPE];
  const keyAt = w[L.H_STATE_OFFSET] + w[L.H_STATE_WORDS];
  let n = 0;
  for (let s = 0; s < slots; s++) {
    const base = L.HEADER_WORDS + s * w[L.H_SLOT_WORDS];
    if ((w[base + L.S_CTRL] & 3) !== L.LIVE || w[base + L.S_TAT] === L.DEAD) continue;
    const len = w[base + L.S_KEY_BYTES];
    if (new TextDecoder().decode(bytes.slice(4 * (base + keyAt), 4 * (base + keyAt) + len)) === key) n++;
  }
  return n;
}
