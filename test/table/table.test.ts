import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';
import { HASHED_LAYOUT } from '../helpers/layout.js';

describe('the shared table', () => {
  it('keeps keys whose hashes collide completely apart', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(3), maxKeys: 30, clock, forceHash: 12345 });
    const keys = Array.from({ length: 40 }, (_, i) => `user:${i}`);
    for (const key of keys) for (let i = 0; i < 3; i++) expect(limiter.allow(key)).toBe(true);
    for (const key of keys) expect(limiter.tryAcquire(key)).toMatchObject({ allowed: false, reason: 'limited' });
    expect(limiter.stats().liveKeys).toBe(40);
    // A second instance (another thread would attach the same way) sees the same 40 states.
    const other = RateLimiter.attach(limiter.handle);
    for (const key of keys) expect(other.tryAcquire(key, 0).remaining).toBe(0);
    expect(other.tryAcquire('user:40', 0).remaining).toBe(3);
  });

  it("refuses new keys when full under onFull 'deny', and recovers once keys go idle", () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 4, clock });
    const { capacity } = limiter.stats();
    for (let i = 0; i < capacity; i++) expect(limiter.allow(`k${i}`)).toBe(true);
    const d = limiter.tryAcquire('newcomer');
    expect(d).toMatchObject({ allowed: false, reason: 'table-full' });
    expect(d.retryAfterMs).toBeGreaterThan(0);
    expect(limiter.tryAcquire('k0', 0).remaining).toBe(1); // existing keys unaffected
    clock.advance(499);
    expect(limiter.tryAcquire('newcomer').reason).toBe('table-full'); // nobody idle yet
    clock.advance(2); // 501 ms: every key's one request has drained
    expect(limiter.tryAcquire('newcomer')).toMatchObject({ allowed: true, remaining: 1, reason: 'allowed' });
  });

  it("lets new keys through untracked when full under onFull 'allow'", () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 4, clock, onFull: 'allow' });
    for (let i = 0; i < limiter.stats().capacity; i++) limiter.allow(`k${i}`);
    for (let i = 0; i < 5; i++) expect(limiter.tryAcquire('newcomer')).toMatchObject({ allowed: true, reason: 'table-full' });
    expect(limiter.tryAcquire('k1', 2)).toMatchObject({ allowed: false, reason: 'limited' });
  });

  it('sweep() reclaims only keys whose state equals a fresh key, losing no quota', () => {
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(10), maxKeys: 100, clock });
    limiter.tryAcquire('busy', 10);
    limiter.tryAcquire('light', 1);
    limiter.tryAcquire('probe-only', 0);
    expect(limiter.sweep()).toBe(0); // at the same instant nothing is strictly idle yet
    clock.advance(100);
    expect(limiter.sweep()).toBe(1); // 'probe-only' (fresh); 'light' is idle only at 100 ms exactly
    clock.advance(1);
    expect(limiter.sweep()).toBe(1); // 'light'
    // No live key's probe chain crosses the two reclaimed slots: the sweep's compaction made them EMPTY.
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, tombstones: 0 });
    expect(limiter.tryAcquire('busy', 0).remaining).toBe(1); // 101 ms later: one interval back
    clock.advance(1000);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('busy', 10).allowed).toBe(true); // a reclaimed key is a fresh key
  });

  it('never lets a cached slot spend quota of another key that reused it (ABA)', () => {
    const clock = new ManualClock();
    const a = new RateLimiter({ limit: perSecond(4), maxKeys: 2, clock, forceHash: 1 });
    const b = RateLimiter.attach(a.handle);
    expect(a.allow('x')).toBe(true); // a caches x -> slot s
    clock.advance(1000);
    expect(b.sweep()).toBe(1); // x reclaimed; slot s is a tombstone
    expect(b.tryAcquire('y', 3).remaining).toBe(1); // y reuses slot s (all keys collide)
    expect(a.tryAcquire('x', 4)).toMatchObject({ allowed: true, remaining: 0 }); // x is fresh
    expect(b.tryAcquire('y', 0).remaining).toBe(1); // y lost nothing to x
    expect(a.stats().liveKeys).toBe(2);
  });

  it('reports memory per key', () => {
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys: 1000, ...HASHED_LAYOUT });
    const s = limiter.stats();
    expect(s.capacity).toBe(2048);
    // A slot: 5 header words, 24 bytes of key (6 words), the word referring to its heap record;
    // then the counters, 16 cache lines (the slots end on a line here), then 1,024 reset marks
    // of three words.
    expect(s.tableBytes).toBe(512 + 2048 * (5 + 6 + 1) * 4 + 16 * 64 + 1024 * 12);
    expect(s.keyHeapBytes).toBe(65_536);
    // Keys of at most 24 bytes: no heap, and no reference word.
    const short = new RateLimiter({ limit: perSecond(1), maxKeys: 1000, maxKeyBytes: 24, ...HASHED_LAYOUT }).stats();
    expect(short.tableBytes).toBe(512 + 2048 * (5 + 6) * 4 + 16 * 64 + 1024 * 12);
    expect(short.keyHeapBytes).toBe(0);
  });
});

describe('a reclaim interrupted between its two steps (its thread died)', () => {
  it('is finished by the next lookup of the key, or by sweep()', async () => {
    const { DEAD, HEADER_WORDS, H_SLOT_WORDS, S_CTRL, S_TAT, LIVE } = await import('../../src/table/layout.js');
    const clock = new ManualClock();
    const limiter = new RateLimiter({ limit: perSecond(2), maxKeys: 4, clock });
    limiter.allow('a');
    limiter.allow('b');
    clock.advance(1000);
    // Do the first step of a reclaim by hand on every live slot: tat -> DEAD, ctrl left LIVE.
    const w = new Int32Array(limiter.handle.table);
    const slotWords = w[H_SLOT_WORDS] as number;
    let marked = 0;
    // The slots only (past them lie the counters and the reset marks, whose words are no ctrl).
    for (let slot = 0; slot < limiter.stats().capacity; slot++) {
      const base = HEADER_WORDS + slot * slotWords;
      if (((w[base + S_CTRL] as number) & 3) === LIVE) { w[base + S_TAT] = DEAD; marked++; }
    }
    expect(marked).toBe(2);
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, tombstones: 2 });
    // A lookup of 'a' finishes a's reclaim and inserts it again, fresh.
    expect(limiter.tryAcquire('a', 2)).toMatchObject({ allowed: true, remaining: 0 });
    // sweep() finishes b's.
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('b', 2)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.stats()).toMatchObject({ liveKeys: 2 });
  });
});

describe('hash spread', () => {
  it.each([1, 2024])('holds maxKeys structured keys (hash seed %i) without a full stripe', (hashSeed) => {
    const maxKeys = 100_000;
    const limiter = new RateLimiter({ limit: perSecond(1), maxKeys, hashSeed, clock: new ManualClock() });
    let full = 0;
    for (let i = 0; i < maxKeys; i++) {
      if (limiter.tryAcquire(`tenant-${String(i).padStart(7, '0')}:api`).reason === 'table-full') full++;
    }
    expect(full).toBe(0);
    expect(limiter.stats().liveKeys).toBe(maxKeys);
  });
});
