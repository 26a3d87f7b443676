// Keys longer than a slot holds (24 bytes): their tail lives in the slot's record in the key heap
// (src/table/key-heap.ts). Every key is stored in full and compared in full: two keys that differ
// only past the 24th byte, with one hash (forceHash), never share state.
import { describe, expect, it } from 'vitest';
import {
  ConcurrencyLimiter, ManualClock, monotonicClock, perSecond, PolicyLimiter, RateLimiter, type RateLimiterHandle,
} from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { allocateKeyHeap, KeyHeap, keyHeapBytes, MAX_HEAP_BYTES } from '../../src/table/key-heap.js';
import { INLINE_KEY_BYTES } from '../../src/table/layout.js';
import { SlotIndex } from '../../src/table/slot-index.js';
import { SlotTable } from '../../src/table/table.js';
import { duplicateKeys, keyAt, liveCopies } from '../helpers/table-scan.js';
import { raceUntilLost } from '../helpers/workers.js';

const PREFIX = 'tenant-0123456789abcdef/'; // 24 bytes: a key's tail starts right after it
/** Enough keys for a table with a key heap: 1,250 slots of up to 4,096 bytes of key exceed INLINE_ALL_BYTES. */
const HEAP_KEYS = 1_000;

describe('long keys', () => {
  it.each([
    ['with a key heap', HEAP_KEYS, true],
    ['in a small table, which holds its keys whole', 64, false],
  ])('a key of 25 to 4,096 bytes has its own state, even when only its last byte differs and every hash is equal (%s)', (_, maxKeys, heap) => {
    const clock = new ManualClock(0);
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys, clock, forceHash: 11, cacheSize: 0 });
    expect(limiter.handle.keys !== null).toBe(heap);
    const keys = [25, 28, 29, 64, 65, 1000, 4096].flatMap((n) => ['a', 'b'].map((last) => PREFIX + 'x'.repeat(n - PREFIX.length - 1) + last));
    keys.push(PREFIX, PREFIX.slice(0, 23)); // 24 and 23 bytes: held in the slot alone
    for (const k of keys) expect(limiter.tryAcquire(k, 2).allowed, k.length + ' bytes').toBe(true);
    for (const k of keys) expect(limiter.tryAcquire(k).allowed, k.length + ' bytes').toBe(false);
    expect(limiter.stats().liveKeys).toBe(keys.length);
    expect(duplicateKeys(limiter.handle.table, limiter.handle.keys)).toEqual([]);
    expect(new Set(liveCopies(limiter.handle.table, limiter.handle.keys).keys())).toEqual(new Set(keys));
    expect(() => limiter.tryAcquire('x'.repeat(4097))).toThrow(/key must be at most 4096 UTF-8 bytes \(option maxKeyBytes\)/);
  });

  it('counts UTF-8 bytes across the slot boundary: a multi-byte character split between slot and record', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: HEAP_KEYS, clock: new ManualClock(0), forceHash: 3, cacheSize: 0 });
    // 23 ASCII bytes, then 'é' (2 bytes: the 24th and 25th), then more.
    const a = PREFIX.slice(0, 23) + 'é' + 'tail-a';
    const b = PREFIX.slice(0, 23) + 'é' + 'tail-b';
    expect(limiter.allow(a)).toBe(true);
    expect(limiter.allow(b)).toBe(true);
    expect(limiter.allow(a)).toBe(false);
    expect(new Set(liveCopies(limiter.handle.table, limiter.handle.keys).keys())).toEqual(new Set([a, b]));
  });

  it('a slot keeps its record: a reused slot writes the next long key into it, and grows it only for a longer tail', () => {
    const clock = new ManualClock(0);
    // One key at a time in one chain: each new key takes the slot the last one left.
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: HEAP_KEYS, clock, forceHash: 5, cacheSize: 0 });
    const heapBefore = limiter.stats().keyHeapBytes;
    const top = (): number => new Int32Array(limiter.handle.keys as SharedArrayBuffer)[1] as number;
    const lengths = [40, 40, 30, 100, 60, 100, 24, 100];
    const tops: number[] = [];
    for (const [i, n] of lengths.entries()) {
      const key = `${i}`.padEnd(n, '.');
      expect(limiter.allow(key), `key ${i}`).toBe(true);
      expect(limiter.allow(key), `key ${i} again`).toBe(false);
      expect([...liveCopies(limiter.handle.table, limiter.handle.keys).keys()]).toEqual([key]);
      tops.push(top());
      clock.advance(2000); // idle: its state is a fresh key's since before now
      expect(limiter.sweep()).toBe(1);
    }
    // Records: 40 bytes needs 4 tail words (first), 30 and 24 fit, 100 needs 19 (larger than
    // twice 4), 60 and 100 fit it. Each record is its capacity plus one word.
    const first = 4; // HEAP_FIRST_RECORD
    expect(tops).toEqual([first + 5, first + 5, first + 5, first + 5 + 20, first + 25, first + 25, first + 25, first + 25]);
    expect(limiter.stats().keyHeapBytes).toBe(heapBefore);
  });

  it('a heap that cannot grow leaves a new long key out, as a full stripe does, and changes nothing else', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: HEAP_KEYS, clock: new ManualClock(0) });
    // This thread's own view of the table with a heap of one page: room for a few records.
    const heap = allocateKeyHeap(4096);
    const table = new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), monotonicClock), heap);
    const index = new SlotIndex(table, 0);
    let placed = 0;
    for (; placed < 100 && index.locate(PREFIX + 'y'.repeat(200) + placed) !== undefined; placed++);
    // 4,096 bytes: 4 header words, then records of 52 words (225 or 226 bytes of key are 57
    // words, 6 of them in the slot: 51 tail words and the record's capacity).
    expect(placed).toBe(Math.floor((4096 / 4 - 4) / 52));
    expect(table.scan()).toMatchObject({ live: placed, claimed: 0 });
    expect(index.locate(PREFIX + 'y'.repeat(200) + 'z')).toBeUndefined();
    // A short key still goes in; the keys placed are all found, each in full.
    expect(index.locate('short')).toBeDefined();
    const heapView = new KeyHeap(heap);
    expect(heapView.allocate(100)).toBe(0);
    for (let i = 0; i < placed; i++) expect(keyAt(limiter.handle.table, (index.locate(PREFIX + 'y'.repeat(200) + i) as { base: number }).base, heap)).toBe(PREFIX + 'y'.repeat(200) + i);
  });

  // Found by the memory benchmark: a table for 1,000,000 keys has a heap bound of 2 GiB, whose
  // word count read with a signed shift was negative, so every record was refused (liveKeys 0).
  it('a heap of 2 GiB (a table for 1,000,000 keys) hands out records', () => {
    const heap = new KeyHeap(allocateKeyHeap(MAX_HEAP_BYTES));
    expect(heap.buffer.maxByteLength).toBe(2 ** 31);
    expect(heap.allocate(10)).toBe(4);
    expect(heap.allocate(10)).toBe(15);
    expect(keyHeapBytes(1_250_000, 1018)).toBe(MAX_HEAP_BYTES);
  });

  it('attach needs the handle whole: a missing or foreign key heap is a TypeError', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: HEAP_KEYS });
    const noKeys: Record<string, unknown> = { ...limiter.handle };
    delete noKeys.keys;
    expect(() => RateLimiter.attach(noKeys as unknown as RateLimiterHandle)).toThrow(/handle\.keys must be the key heap that came with the table/);
    expect(() => RateLimiter.attach({ ...limiter.handle, keys: new SharedArrayBuffer(64) })).toThrow(TypeError);
    // A table of short keys only has no heap, and needs none; nor does a small one.
    expect(new RateLimiter({ limit: perSecond(1), maxKeys: 8 }).handle.keys).toBeNull();
    const short = new RateLimiter({ limit: perSecond(1), maxKeys: HEAP_KEYS, maxKeyBytes: INLINE_KEY_BYTES });
    expect(short.handle.keys).toBeNull();
    expect(RateLimiter.attach(short.handle).allow('k')).toBe(true);
    expect(() => short.allow('x'.repeat(INLINE_KEY_BYTES + 1))).toThrow(/at most 24 UTF-8 bytes/);
  });

  it('PolicyLimiter and ConcurrencyLimiter take long keys too', () => {
    const user = 'user:' + 'u'.repeat(200);
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 16, clock: new ManualClock(0) });
    expect(policy.allow({ user, api: 'a'.repeat(100) })).toBe(true);
    expect(policy.allow({ user, api: 'a'.repeat(99) + 'b' })).toBe(true);
    expect(policy.allow({ user, api: 'a'.repeat(100) })).toBe(false);
    const leases = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1000, maxKeys: 16, clock: new ManualClock(0) });
    const first = leases.tryAcquire(user + '1');
    expect(first.allowed).toBe(true);
    expect(leases.tryAcquire(user + '2').allowed).toBe(true);
    expect(leases.tryAcquire(user + '1').allowed).toBe(false);
  });
});

describe('long keys on real worker_threads', () => {
  it('4 workers inserting 2,000 long keys at once (the heap growing under them) give each exactly its quota', async () => {
    // Exact in every round; rounds go on until the workers are seen racing on a slot (one is
    // forced if a busy machine ran them one after the other: raceUntilLost).
    await raceUntilLost<{ admitted: number[]; casRetries: number }>(() => {
      const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 2_500, clock: new ManualClock(0) });
      const keys = Array.from({ length: 2_000 }, (_, i) => `${PREFIX}${'k'.repeat(i % 90)}:${i}`);
      return {
        workers: Array.from({ length: 4 }, (_, id) => ({ mode: 'hammer', handle: limiter.handle, id, keys, attempts: keys.length * 4, cost: 1 })),
        check(all) {
          const perKey = keys.map((_, k) => all.reduce((sum, r) => sum + (r.admitted[k] ?? 0), 0));
          expect(perKey.filter((n) => n !== 5)).toEqual([]);
          expect(limiter.stats().liveKeys).toBe(keys.length);
          expect(duplicateKeys(limiter.handle.table, limiter.handle.keys)).toEqual([]);
          expect(limiter.stats().keyHeapBytes).toBeGreaterThan(65_536); // it grew while they ran
        },
      };
    }, 6);
  });
});
