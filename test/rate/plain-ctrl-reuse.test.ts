// The ctrl reads after a snapshot, which are plain reads where every key state is an int32 word
// (docs/design.md, "Plain reads of ctrl").
// 1. A thread whose cache still points at k's old slot, now reused by j (full), must not decide k
//    on j's state: the ctrl check after the snapshot sends it to k's new slot. One case per site
//    (Gcra32.#spend before deciding, #allowGcra, decide, #decideBatched). Each fails (k refused)
//    with that site's ctrl check removed. Single-threaded: it checks the checks exist, not the
//    memory model.
// 2. Which configurations read ctrl plainly: int32-only key states may skip Atomics.load of ctrl;
//    a 64-bit or two-word state (64-bit compareExchange) must keep it.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { S_CTRL } from '../../src/table/layout.js';
import { slotBaseOf } from '../helpers/slots.js';
import { loadsDuring } from '../helpers/atomics-spy.js';

type Opts = Omit<RateLimiterOptions, 'maxKeys' | 'clock'>;
const twoGcra: Opts = { limit: [perSecond(10, { burst: 2 }), perMinute(600, { burst: 50 })] };
const cases: [string, Opts, 'allow' | 'tryAcquire'][] = [
  ['one 32-bit GCRA limit (Gcra32.#spend)', { limit: perSecond(10, { burst: 2 }) }, 'allow'],
  ['two 32-bit GCRA limits, allow (#allowGcra)', twoGcra, 'allow'],
  ['two 32-bit GCRA limits, tryAcquire (decide)', twoGcra, 'tryAcquire'],
  ['fixed window, int32 word (decide)', { algorithm: 'fixed-window', limit: { permits: 2, periodMs: 1_000 } }, 'allow'],
  ['two GCRA limits + batched cap (#decideBatched)', { ...twoGcra, globalLimit: perSecond(1_000_000, { burst: 100_000 }) }, 'allow'],
];

describe('a cached slot reused by another key before the snapshot', () => {
  it.each(cases)('%s: k is decided on its own fresh state, not on j\'s', (_, opts, call) => {
    const clock = new ManualClock(1_000_000);
    const a = new RateLimiter({ ...opts, maxKeys: 4, forceHash: 12345, clock } as RateLimiterOptions);
    const b = RateLimiter.attach(a.handle);
    const ask = (l: RateLimiter, key: string): boolean => (call === 'allow' ? l.allow(key) : l.tryAcquire(key).allowed);
    expect(ask(a, 'k')).toBe(true); // a caches k's slot
    const kBase = slotBaseOf(a.handle.table, 'k');
    clock.advance(10_000); // k idle
    expect(b.sweep()).toBeGreaterThanOrEqual(1);
    let n = 0;
    while (ask(b, 'j') && n < 1_000) n++; // j takes k's slot and spends it to the limit
    expect(slotBaseOf(a.handle.table, 'j')).toBe(kBase);
    expect(ask(b, 'j')).toBe(false);
    // a's cache still says k lives at kBase with the old ctrl: the snapshot is j's (full).
    expect(ask(a, 'k')).toBe(true);
  });
});

/** Atomics.load calls on `key`'s ctrl word during one cached decision. */
function ctrlLoads(opts: Opts, call: 'allow' | 'tryAcquire'): number {
  const clock = new ManualClock(1_000_000);
  const a = new RateLimiter({ ...opts, maxKeys: 4, clock } as RateLimiterOptions);
  a.allow('k');
  clock.advance(1);
  const at = slotBaseOf(a.handle.table, 'k') + S_CTRL;
  return loadsDuring(() => (call === 'allow' ? a.allow('k') : a.tryAcquire('k')), (arr, i) => arr.buffer === a.handle.table && i === at);
}

describe('which states read ctrl plainly', () => {
  it.each(cases)('%s: no Atomics.load of ctrl on a cached decision', (_, opts, call) => {
    expect(ctrlLoads(opts, call)).toBe(0);
  });
  const wide = { permits: 1e9, periodMs: 1, burst: 1e9 }; // a 64-bit GCRA state
  const keep: [string, Opts, 'allow' | 'tryAcquire'][] = [
    ['a 64-bit GCRA limit beside a 32-bit one', { limit: [perSecond(10), wide] }, 'allow'],
    ['a 64-bit GCRA limit beside a 32-bit one, tryAcquire', { limit: [perSecond(10), wide] }, 'tryAcquire'],
    ['a sliding window (two-word state)', { algorithm: 'sliding-window', limit: perSecond(10) }, 'allow'],
  ];
  it.each(keep)('%s: keeps Atomics.load of ctrl', (_, opts, call) => {
    expect(ctrlLoads(opts, call)).toBeGreaterThanOrEqual(1);
  });
});
