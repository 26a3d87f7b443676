// The SLAB table layout (src/table/slab-layout.ts): slots handed out in arrival order, found
// through a directory. What differs from the HASHED layout is tested here; the whole suite also runs
// with SLAB as every table's default (npm run test:slab, docs/testing.md).
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { DEAD, H_DIRECTORY, H_SLOT_WORDS, H_SLOTS_PER_STRIPE, H_STRIPES, HEADER_WORDS, S_CTRL, S_HASH, S_TAT } from '../../src/table/layout.js';
import { loadsDuring, withAtomicsHooks } from '../helpers/atomics-spy.js';
import { pastTimeout, stagedReuse } from '../helpers/park.js';
import { SlotTable } from '../../src/table/table.js';
import { SLAB_LAYOUT } from '../helpers/layout.js';
import { slotBaseOf } from '../helpers/slots.js';
import { duplicateKeys, liveCopies } from '../helpers/table-scan.js';
import { raceUntilLost } from '../helpers/workers.js';

/** The slot number of `key` in `limiter`'s table (-1: none). */
function slotOf(limiter: RateLimiter, key: string): number {
  const base = slotBaseOf(limiter.handle.table, key);
  const slotWords = new Int32Array(limiter.handle.table)[H_SLOT_WORDS] as number;
  return base < 0 ? -1 : (base - HEADER_WORDS) / slotWords;
}

/** This thread's view of `limiter`'s table, for its probe lengths. */
function tableOf(limiter: RateLimiter, clock: ManualClock): SlotTable {
  return new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), clock), limiter.handle.keys);
}

describe('the SLAB layout', () => {
  it('gives keys that arrive together slots side by side, whatever their hashes', () => {
    const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 5_000, clock: new ManualClock(), ...SLAB_LAYOUT });
    const keys = Array.from({ length: 1_000 }, (_, i) => `user:${i * 7919}`);
    for (const k of keys) expect(limiter.allow(k)).toBe(true);
    const slots = keys.map((k) => slotOf(limiter, k));
    // The first view's cursor starts at slot 0 and moves one slot per new key.
    expect(slots).toEqual(keys.map((_, i) => i));
    // An attached view (another thread's) finds them all, and starts its own run elsewhere.
    const other = RateLimiter.attach(limiter.handle);
    for (const k of keys) expect(other.tryAcquire(k, 0).remaining).toBe(4);
    expect(other.allow('newcomer')).toBe(true);
    expect(slotOf(limiter, 'newcomer')).toBeGreaterThanOrEqual(keys.length);
  });

  it('refuses no key below maxKeys, refuses one past its slots, and takes the slots of idle keys back', () => {
    const clock = new ManualClock();
    const maxKeys = 2_000; // past SMALL_TABLE: maxKeys and a sixteenth more slots
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys, clock, ...SLAB_LAYOUT });
    const { capacity } = limiter.stats();
    expect(capacity).toBe(maxKeys + maxKeys / 16);
    for (let i = 0; i < capacity; i++) expect(limiter.tryAcquire(`k${i}`).reason, `key ${i}`).toBe('allowed');
    expect(limiter.tryAcquire('one-more')).toMatchObject({ allowed: false, reason: 'table-full' });
    expect(limiter.tryAcquire('k7', 0).remaining).toBe(0); // existing keys unaffected
    clock.advance(1_001); // every key idle
    // The insert that finds no free slot reclaims the idle keys of one window (256 slots: a HASHED
    // table sweeps the key's full stripe), takes one slot and keeps the others.
    expect(limiter.tryAcquire('one-more').reason).toBe('allowed');
    expect(limiter.stats().liveKeys).toBe(capacity - 256 + 1);
    for (let i = 0; i < 500; i++) expect(limiter.allow(`again${i}`)).toBe(true);
    expect(duplicateKeys(limiter.handle.table, limiter.handle.keys)).toEqual([]);
  });

  it('keeps keys whose hashes collide completely apart, and finds each once', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(3), maxKeys: 60, clock, forceHash: 12345, ...SLAB_LAYOUT });
    const keys = Array.from({ length: 60 }, (_, i) => `user:${i}`);
    for (const key of keys) for (let i = 0; i < 3; i++) expect(limiter.allow(key)).toBe(true);
    for (const key of keys) expect(limiter.allow(key)).toBe(false);
    expect(new Set(liveCopies(limiter.handle.table).keys())).toEqual(new Set(keys));
    expect(duplicateKeys(limiter.handle.table)).toEqual([]);
  });

  it('under churn (50x maxKeys never-repeating keys, swept), keeps hit and miss probes within 1.2x of a fresh table', () => {
    const clock = new ManualClock();
    const maxKeys = 4_000;
    const options = { limit: perSecond(10), maxKeys, maxKeyBytes: 24, clock, hashSeed: 77, ...SLAB_LAYOUT };
    const limiter = new RateLimiter(options);
    const working = Array.from({ length: maxKeys / 4 }, (_, i) => `ws:${i}`);
    let next = 0;
    for (let phase = 0; phase < 200; phase++) {
      for (let i = 0; i < maxKeys / 4; i++) {
        limiter.allow(`new:${next++}`);
        if (i % 4 === 0) limiter.allow(working[(i / 4 + phase) % working.length] as string);
      }
      clock.advance(150); // the new keys go idle (one admission drains in 100 ms)
      for (const k of working) limiter.allow(k); // the working set spends again: not idle at the sweep
      limiter.sweep();
    }
    expect(next).toBe(50 * maxKeys);
    const churned = tableOf(limiter, clock).probeLengths();
    // A fresh table of the same shape and seed holding the same live keys.
    const fresh = new RateLimiter(options);
    const live = [...liveCopies(limiter.handle.table).keys()];
    for (const k of live) fresh.allow(k);
    const base = tableOf(fresh, clock).probeLengths();
    expect(live.length).toBe(limiter.stats().liveKeys);
    expect(live.length).toBe(working.length);
    expect(churned.mean).toBeLessThanOrEqual(1.2 * base.mean);
    expect(churned.missMean).toBeLessThanOrEqual(1.2 * base.missMean);
    // The gauges from the counters agree with the table's own count.
    expect(limiter.gauges().probeMean).toBeCloseTo(churned.mean, 9);
    expect(duplicateKeys(limiter.handle.table)).toEqual([]);
  });

  it('holds 100,000 keys of up to 24 bytes in at most 64 bytes each, every option at its default', () => {
    const maxKeys = 100_000;
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys, clock: new ManualClock(), ...SLAB_LAYOUT });
    let refused = 0;
    for (let i = 0; i < maxKeys; i++) if (limiter.tryAcquire(`tenant-${String(i).padStart(7, '0')}:api`).reason === 'table-full') refused++;
    expect(refused).toBe(0);
    const s = limiter.stats();
    expect(s.liveKeys).toBe(maxKeys);
    expect(s.tableBytes / maxKeys).toBeLessThanOrEqual(64);
  });

  it('keeps a stale entry reachable: a compaction does not clear the tombstone before the entry of a slot a lookup freed', () => {
    const clock = new ManualClock(900_000);
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 2, forceHash: 7, clock, ...SLAB_LAYOUT });
    const w = new Int32Array(limiter.handle.table);
    // Entry i of the chain every key (hash 7) shares: from its home, wrapping in the one stripe.
    const stripe = w[H_SLOTS_PER_STRIPE] as number;
    const home = (Math.imul(7, 0x9e3779b1) >>> (32 - Math.max(6, Math.log2(stripe)))) & (stripe - 1);
    const entry = (i: number): number => w[(w[H_DIRECTORY] as number) + ((home + i) & (stripe - 1))] as number;
    expect(limiter.allow('x')).toBe(true); // slot 0, the chain's entry 0
    clock.set(1_000_000);
    expect(limiter.allow('c')).toBe(true); // slot 1, entry 1
    expect(limiter.sweep()).toBe(1); // 'x': its entry becomes a tombstone, kept (c's chain crosses it)
    expect(entry(0) & 3).toBe(3);
    // c's reclaimer stopped right after its linearisation point; a lookup finishes the reclaim
    // (slot 1 TOMB) and leaves c's entry for the slot's next claimer to clear.
    Atomics.store(w, HEADER_WORDS + (w[H_SLOT_WORDS] as number) + S_TAT, DEAD);
    const other = RateLimiter.attach(limiter.handle);
    expect(other.get('c')).toBeNull();
    expect(entry(1) & 3).toBe(1); // stale
    // A compaction alone (no sweep to clear the stale entry first) must keep entry 0: the slot's
    // next claimer looks for entry 1 from the chain's home.
    tableOf(limiter, clock).compactStripe(0);
    expect(entry(0) & 3).toBe(3);
    // c comes back: one copy, one entry.
    expect(other.allow('c')).toBe(true);
    expect(other.allow('c')).toBe(false);
    expect(duplicateKeys(limiter.handle.table)).toEqual([]);
    expect(w[H_STRIPES]).toBe(1);
    const refs = Array.from({ length: stripe }, (_, i) => entry(i)).filter((e) => (e & 3) === 1);
    expect(new Set(refs).size).toBe(refs.length);
    expect(tableOf(limiter, clock).probeLengths().mean).toBeGreaterThan(0);
  });

  it('a sweep stalled past the reuse age while it clears a freed slot leaves the entry of the key the slot holds since alone', () => {
    // Found by the explorer (slab-compaction, deep, with clock moves of 60 s): the sweep claims
    // idle x's freed slot to clear its entry and stalls past reuseAfterMs (here 5 ms); an insert
    // of y takes the expired claim over, clears x's entry, and places y's at the same position:
    // the same REF word (same slot, and every key hashes alike). The sweep then cleared y's
    // entry, and y, live, could no longer be found (a second copy would get a second burst).
    let t = 1_000_000;
    const clock = { now: (): number => t };
    const a = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: 2, forceHash: 7, clock, ...stagedReuse(1, 5), ...SLAB_LAYOUT });
    expect(a.stats().capacity).toBe(4);
    for (const k of ['x', 'p', 'q', 'r']) expect(a.allow(k)).toBe(true); // slots 0 to 3
    t += 10_000; // all idle
    for (const k of ['p', 'q', 'r']) expect(a.allow(k)).toBe(true); // busy again: only x is swept
    const b = RateLimiter.attach(a.handle, { clock });
    const x = slotBaseOf(a.handle.table, 'x');
    let staged = false;
    withAtomicsHooks({
      load: (arr, i) => {
        // The sweep's load of the freed slot's hash comes right after its claim of the slot.
        if (staged || arr.buffer !== a.handle.table || i !== x + S_HASH) return;
        staged = true;
        expect(Atomics.load(arr, x + S_CTRL) & 3).toBe(1); // the sweep's claim (BUSY)
        pastTimeout(10); // the sweep stalls past reuseAfterMs
        expect(b.allow('y')).toBe(true); // takes the expired claim over: y lives in x's old slot
      },
    }, () => expect(a.sweep()).toBe(1));
    expect(staged).toBe(true);
    expect(slotBaseOf(a.handle.table, 'y')).toBe(x);
    // A lookup that nothing cached finds y, its one admission spent.
    expect(RateLimiter.attach(a.handle, { clock, cacheSize: 0 }).get('y')).toMatchObject({ remaining: 0 });
    expect(duplicateKeys(a.handle.table)).toEqual([]);
  });

  it('refuses a new key on a table full of keys that are not idle without reading the whole table', () => {
    // Found by an attack: the insert went twice round every slot (retiring each LIVE key on the
    // second round) before it answered full: 23 ms a request on a full table of 200,000 keys,
    // against 0.1 ms for a HASHED table, which reads the key's stripe.
    const clock = new ManualClock(); // frozen: no key goes idle
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 50_000, clock, ...SLAB_LAYOUT });
    const table = limiter.handle.table;
    let i = 0;
    while (limiter.tryAcquire(`k${i}`).reason !== 'table-full') i++;
    expect(i).toBeGreaterThanOrEqual(50_000); // none refused below maxKeys
    let reason = '';
    const loads = loadsDuring(() => { reason = limiter.tryAcquire('newcomer').reason; }, (arr) => arr.buffer === table);
    expect(reason).toBe('table-full');
    expect(loads).toBeLessThan(limiter.stats().capacity / 20);
  });

  it("gauges() agree with stats() after an insert that reclaimed idle keys to find a slot", () => {
    // Found by an attack: stats() counted the entries a reclaim left behind (stale until their
    // slots' next claimers clear them) as tombstones, gauges() only the directory's tombstones.
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 60, clock, ...SLAB_LAYOUT });
    const { capacity } = limiter.stats();
    for (let i = 0; i < capacity; i++) limiter.tryAcquire(`k${i}`);
    clock.advance(1_001); // every key idle
    for (let i = 0; i < 3; i++) expect(limiter.tryAcquire(`new${i}`).reason).toBe('allowed');
    const g = limiter.gauges();
    const s = limiter.stats();
    expect({ live: g.liveKeys, tombstones: g.tombstones }).toEqual({ live: s.liveKeys, tombstones: s.tombstones });
    expect(s.liveKeys).toBe(3);
  });

  it('4 workers inserting the same keys give each key one copy', async () => {
    await raceUntilLost<{ admitted: number[]; casRetries: number }>(() => {
      const keys = Array.from({ length: 8_000 }, (_, i) => `k${i}`);
      const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: keys.length, clock: new ManualClock(), ...SLAB_LAYOUT });
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'hammer', handle: limiter.handle, id, keys, attempts: keys.length, cost: 1 })),
        check(all) {
          // A frozen clock and a burst of 1: a key admitted twice had two copies.
          const admitted = keys.map((_, k) => all.reduce((sum, r) => sum + (r.admitted[k] as number), 0));
          expect(admitted.filter((n) => n !== 1)).toEqual([]);
          expect(limiter.stats().liveKeys).toBe(keys.length);
          expect(duplicateKeys(limiter.handle.table)).toEqual([]);
        },
      };
    });
  });

  it('4 workers inserting colliding keys (one chain) give each key one copy', async () => {
    await raceUntilLost<{ admitted: number[]; casRetries: number }>(() => {
      const keys = Array.from({ length: 200 }, (_, i) => `c${i}`);
      const limiter = new RateLimiter({ limit: perSecond(1, { burst: 1 }), maxKeys: 300, forceHash: 99, clock: new ManualClock(), ...SLAB_LAYOUT });
      // Every worker takes the keys in one order (id 0 for all): they insert the same key at once.
      // A lost insert race counts in casRetries (SlotTable.retries).
      return {
        workers: Array.from({ length: 4 }, () => ({ mode: 'hammer', handle: limiter.handle, id: 0, keys, attempts: keys.length, cost: 1 })),
        check(all) {
          const admitted = keys.map((_, k) => all.reduce((sum, r) => sum + (r.admitted[k] as number), 0));
          expect(admitted.filter((n) => n !== 1)).toEqual([]);
          expect(duplicateKeys(limiter.handle.table)).toEqual([]);
        },
      };
    });
  });
});
